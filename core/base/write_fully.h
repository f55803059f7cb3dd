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
// position (write). "<what>: write failed: <reason>" on an error (FileWriteError's code).
absl::Status WriteFully(int fd, const char* data, std::size_t n, int64_t offset,
                        absl::string_view what);

// Starts writeback of the whole pages of [offset, offset + n) of `fd`
// (sync_file_range), so that a later fsync has less left; a page shared with bytes not
// written yet is left to that fsync. Only advice: a filesystem without it (or an error)
// leaves the work to fsync.
void StartWriteback(int fd, int64_t offset, int64_t n);

// The error of a step of writing a file ("write", "flush", "link", "rename", ...) that
// failed with `err`: RESOURCE_EXHAUSTED for a full filesystem or quota (ENOSPC, EDQUOT:
// the server's disk, not the request nor the device), INTERNAL otherwise.
absl::Status FileWriteError(absl::string_view what, absl::string_view step, int err);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_WRITE_FULLY_H_
