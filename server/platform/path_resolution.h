// Path resolution for the confinement of request paths (data_roots.cc,
// data_roots_output.cc): a path's canonical form, its lexical normal form, whether it lies
// under a root, and where a path that does not resolve would lie.
#ifndef SPEXD_SERVER_PLATFORM_PATH_RESOLUTION_H_
#define SPEXD_SERVER_PLATFORM_PATH_RESOLUTION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spexd::server {

// realpath(3): NOT_FOUND when a component is missing, INVALID_ARGUMENT for a malformed
// name (too long, a symlink loop), PERMISSION_DENIED otherwise.
absl::StatusOr<std::string> RealPath(const std::string& path);

// `path` (absolute) with empty and `.` components dropped and `..` taken lexically.
std::string LexicalNormal(absl::string_view path);

// Whether `path` is `root` or below it (both canonical or both lexical).
bool UnderRoot(const std::string& path, const std::string& root);

// Where a path that does not resolve would lie: its existing ancestors resolved (symlinks
// followed, dangling ones included, as the kernel would on create), the missing rest
// appended lexically. Empty on a symlink loop.
std::string WouldBeLocation(const std::string& path);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_PLATFORM_PATH_RESOLUTION_H_
