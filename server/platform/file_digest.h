// The checksum a reply gives of a file the server wrote (ExtractHeader.output_checksum):
// SHA-256, the default, or CRC-32 (gzip's polynomial, as zlib.crc32 and `crc32` compute
// it). A frame's SHA-256 is ~0.05 s of one core on the H100 host and sequential by nature,
// the last thing a server-written frame's reply waits for;
// libdeflate's CRC-32 takes a few milliseconds, inside the commit's fsync.
#ifndef SPEXD_SERVER_FILE_DIGEST_H_
#define SPEXD_SERVER_FILE_DIGEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/platform/content_id.h"

namespace spexd::server {

enum class FileDigestKind { kSha256, kCrc32 };

// "sha256" or "crc32" (log fields, the summary's field names).
const char* FileDigestName(FileDigestKind kind);

// One file's digest, fed piece by piece (a file read in blocks, never held whole).
class FileDigest {
 public:
  explicit FileDigest(FileDigestKind kind);
  void Update(absl::string_view bytes);
  // Lower-case hex: 64 digits (SHA-256) or 8 (CRC-32); "" on an OpenSSL failure (callers
  // treat it as an error). Once.
  std::string HexDigest();
  FileDigestKind kind() const { return kind_; }

 private:
  FileDigestKind kind_;
  std::optional<Sha256Stream> sha_;  // SHA-256 only: no OpenSSL context for a CRC
  uint32_t crc_ = 0;
};

// The digest of the concatenation of `pieces` (a file held in parts).
std::string FileDigestHex(FileDigestKind kind, const std::vector<absl::string_view>& pieces);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_FILE_DIGEST_H_
