#include "server/data_roots.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/error_text.h"

namespace spexd::server {
namespace {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(core::EchoValue(path), ": no such file or directory"));
    }
    // A malformed name is the request's fault, not a permission (issue 15 item 11).
    if (err == ENAMETOOLONG || err == ELOOP || err == EINVAL) {
      return absl::InvalidArgumentError(absl::StrCat(core::EchoValue(path), ": ", std::strerror(err)));
    }
    return absl::PermissionDeniedError(absl::StrCat(core::EchoValue(path), ": ", std::strerror(err)));
  }
  return std::string(buf);
}

}  // namespace

absl::StatusOr<DataRoots> DataRoots::Create(const std::vector<std::string>& roots) {
  DataRoots out;
  for (const std::string& root : roots) {
    if (root.empty()) continue;
    auto canonical = RealPath(root);
    if (!canonical.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("data root ", root, ": ",
                                                     std::string(canonical.status().message())));
    }
    struct stat st {};
    if (::stat(canonical->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("data root ", root, " is not a directory"));
    }
    out.roots_.push_back(*canonical);
  }
  return out;
}

absl::Status DataRoots::CheckSyntax(const std::string& path) const {
  if (roots_.empty()) {
    return absl::PermissionDeniedError(
        "this server has no data roots (--data_roots): send the file as an upload");
  }
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("path '", path, "' must be absolute"));
  }
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("path contains a NUL byte");
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("path '", path, "' contains '..'"));
    }
  }
  return absl::OkStatus();
}

bool DataRoots::Inside(const std::string& canonical) const {
  for (const std::string& root : roots_) {
    if (root == "/") return true;
    if (canonical == root) return true;
    if (canonical.size() > root.size() && canonical.compare(0, root.size(), root) == 0 &&
        canonical[root.size()] == '/') {
      return true;
    }
  }
  return false;
}

DataRoots::OpenFile::OpenFile(OpenFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), size_(other.size_) {}

DataRoots::OpenFile& DataRoots::OpenFile::operator=(OpenFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    size_ = other.size_;
  }
  return *this;
}

DataRoots::OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string DataRoots::OpenFile::proc_path() const { return absl::StrCat("/proc/self/fd/", fd_); }

absl::StatusOr<DataRoots::OpenFile> DataRoots::Open(const std::string& path,
                                                    int64_t max_bytes) const {
  if (absl::Status s = CheckSyntax(path); !s.ok()) return s;
  // Early, friendly answer for paths that resolve outside (the authoritative check is
  // on the descriptor below).
  auto canonical = RealPath(path);
  if (!canonical.ok()) return canonical.status();
  if (!Inside(*canonical)) {
    return absl::PermissionDeniedError(
        absl::StrCat("path '", path, "' is outside the server's data roots"));
  }
  const int raw = ::open(canonical->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (raw < 0) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  OpenFile file(raw, "", 0);
  auto opened = RealPath(file.proc_path());
  if (!opened.ok() || !Inside(*opened)) {
    return absl::PermissionDeniedError(
        absl::StrCat("path '", path, "' is outside the server's data roots"));
  }
  struct stat st {};
  if (::fstat(raw, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(path, " has ", st.st_size,
                                                     " bytes, over the server's limit of ",
                                                     max_bytes, " bytes"));
  }
  return OpenFile(file.Release(), *opened, static_cast<int64_t>(st.st_size));
}

absl::StatusOr<DataRoots::File> DataRoots::ReadFile(const std::string& path,
                                                    int64_t max_bytes) const {
  auto opened = Open(path, max_bytes);
  if (!opened.ok()) return opened.status();
  File file;
  file.path = opened->path();
  file.bytes.resize(static_cast<std::size_t>(opened->size()));
  std::size_t done = 0;
  while (done < file.bytes.size()) {
    ssize_t n = ::read(opened->fd(), file.bytes.data() + done, file.bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;  // file shrank while reading: parse what is there (FITS checks size)
    done += static_cast<std::size_t>(n);
  }
  file.bytes.resize(done);
  return file;
}

absl::StatusOr<std::string> DataRoots::ResolveForWrite(const std::string& path) const {
  if (absl::Status s = CheckSyntax(path); !s.ok()) return s;
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("output path '", path, "' names no file"));
  }
  auto canonical_dir = RealPath(dir);
  if (!canonical_dir.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output directory ", dir, " does not exist"));
  }
  const std::string full = absl::StrCat(*canonical_dir == "/" ? "" : *canonical_dir, "/", name);
  if (!Inside(full)) {
    return absl::PermissionDeniedError(
        absl::StrCat("output path '", path, "' is outside the server's data roots"));
  }
  struct stat st {};
  if (::lstat(full.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat("output path '", path, "' exists and is not a regular file"));
  }
  return full;
}

}  // namespace spexd::server
