#include "server/platform/path_resolution.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/error_text.h"

namespace spexd::server {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(core::EchoValue(path), ": no such file or directory"));
    }
    // A malformed name is the request's fault, not a permission.
    if (err == ENAMETOOLONG || err == ELOOP || err == EINVAL) {
      return absl::InvalidArgumentError(absl::StrCat(core::EchoValue(path), ": ", std::strerror(err)));
    }
    return absl::PermissionDeniedError(absl::StrCat(core::EchoValue(path), ": ", std::strerror(err)));
  }
  return std::string(buf);
}

std::string LexicalNormal(absl::string_view path) {
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (absl::string_view part : parts) absl::StrAppend(&out, "/", part);
  return out.empty() ? "/" : out;
}

bool UnderRoot(const std::string& path, const std::string& root) {
  if (root == "/" || path == root) return true;
  return path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         path[root.size()] == '/';
}

std::string WouldBeLocation(const std::string& path) {
  std::vector<std::string> rest;  // components still to walk, last first
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    rest.insert(rest.begin(), std::string(part));
  }
  std::string at = "/";
  int links = 0;
  while (!rest.empty()) {
    // A copy, not a move: GCC 12 at -O3 warns (falsely) that a moved-into string may be
    // read uninitialised, and Release builds treat warnings as errors.
    const std::string part = rest.back();
    rest.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      at = at.substr(0, std::max<std::size_t>(1, at.find_last_of('/')));
      continue;
    }
    const std::string next = at == "/" ? "/" + part : at + "/" + part;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) {  // missing from here on
      std::string tail = next;
      while (!rest.empty()) {
        absl::StrAppend(&tail, "/", rest.back());
        rest.pop_back();
      }
      return LexicalNormal(tail);
    }
    if (!S_ISLNK(st.st_mode)) {
      at = next;
      continue;
    }
    if (++links > 40) return "";  // ELOOP, as the kernel
    char target[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof(target) - 1);
    if (n <= 0) return "";
    const std::string link(target, static_cast<std::size_t>(n));
    if (link[0] == '/') at = "/";
    std::vector<std::string> parts;
    for (absl::string_view p : absl::StrSplit(link, '/', absl::SkipEmpty())) parts.emplace_back(p);
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) rest.push_back(*it);
  }
  return at;
}

}  // namespace spexd::server
