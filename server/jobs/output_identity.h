// A retried request's server-side output that is already in place (docs/service.md,
// "Server-written frames"): the first attempt wrote the file but its reply was lost
// (server killed after the rename, network cut, client deadline), and the client, its
// retry loop or a re-run Slurm job asks again. Without `overwrite`, the file there is
// kept and named in the reply when it is the frame this request would write, checksum
// dates aside (core/io/fits_same_content.h); otherwise the request is ALREADY_EXISTS.
#ifndef SPEXD_SERVER_OUTPUT_IDENTITY_H_
#define SPEXD_SERVER_OUTPUT_IDENTITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/platform/file_digest.h"

namespace spexd::server {

// What the reply says of a file kept in place: as the first reply said of it.
struct ExistingOutput {
  int64_t bytes = 0;   // its size on disk
  std::string digest;  // of its bytes on disk (gzip-compressed for a gzip file), hex
};

// Compares the file open at `fd` (read from offset 0 with pread, in 1 MiB blocks: memory
// stays bounded whatever the file holds) with `expected_fits`, the uncompressed FITS file
// about to be written to `path` (gzip-compressed on disk when `gzip`, as the request's
// output target says, OutputFile). The descriptor is the caller's
// (DataRoots::PendingOutput::KeepExisting: confined, O_NOFOLLOW, a regular file).
// A plain file of another size, or a gzip file far larger than the frame, is different
// before any read. Returns the file's size and `kind` digest when it is the same frame;
// ALREADY_EXISTS ("exists with different content ...; set overwrite to replace it")
// otherwise, its message saying where it differs (not FITS, truncated, a byte, a size);
// INTERNAL when the file cannot be read or `expected_fits` is not a FITS file.
absl::StatusOr<ExistingOutput> MatchExistingOutput(
    int fd, const std::vector<absl::string_view>& expected_fits, const std::string& path,
    bool gzip, FileDigestKind kind);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_OUTPUT_IDENTITY_H_
