// Writes a whole buffer to a file descriptor, through short writes and EINTR: the one
// loop behind every file spexd writes (frame files, server-side outputs).
#ifndef SPEXD_CORE_BASE_WRITE_FULLY_H_
#define SPEXD_CORE_BASE_WRITE_FULLY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace spexd::core {

// `n` bytes of `data` to `fd`: at `offset` (pwrite) when offset >= 0, else at the file's
// position (write). INTERNAL "<what>: write failed: <reason>" on an error.
absl::Status WriteFully(int fd, const char* data, std::size_t n, int64_t offset,
                        absl::string_view what);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_WRITE_FULLY_H_
