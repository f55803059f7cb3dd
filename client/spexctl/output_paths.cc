#include "client/spexctl/output_paths.h"

#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace spexd::client {

std::string OutputPathKey(const std::string& path) {
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (!part.empty() && part != ".") parts.push_back(part);
  }
  const bool absolute = !path.empty() && path[0] == '/';
  if (parts.empty()) return absolute ? "/" : ".";
  const std::string name(parts.back());
  parts.pop_back();
  std::string dir = absl::StrCat(absolute ? "/" : "", absl::StrJoin(parts, "/"));
  if (dir.empty()) dir = ".";
  // The directory as the kernel would find it: a symlinked directory is the same output.
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) != nullptr) dir = resolved;
  return dir == "/" ? absl::StrCat("/", name) : absl::StrCat(dir, "/", name);
}

std::string EscapeForLine(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char hex[5];
          std::snprintf(hex, sizeof(hex), "\\x%02x", c);
          out += hex;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

}  // namespace spexd::client
