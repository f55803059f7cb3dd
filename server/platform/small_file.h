// Reading the small files an operator names on the command line (the --config file, the
// bearer token, TLS PEM files) at startup: only a regular file, of bounded size, and
// without blocking, so that a FIFO, a directory or /dev/zero given by mistake is refused
// with a message instead of hanging startup or filling memory.
#ifndef SPEXD_SERVER_PLATFORM_SMALL_FILE_H_
#define SPEXD_SERVER_PLATFORM_SMALL_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace spexd::server {

// The contents of `path` (symlinks followed: a Kubernetes ConfigMap mounts its files
// through them). INVALID_ARGUMENT ("cannot read <what> <path>: <why>") when it cannot be opened,
// is not a regular file, or is over `max_bytes`.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes,
                                          const std::string& what);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_PLATFORM_SMALL_FILE_H_
