#include "server/platform/file_digest.h"

#include <libdeflate.h>

#include "absl/strings/str_format.h"

namespace spexd::server {

const char* FileDigestName(FileDigestKind kind) {
  return kind == FileDigestKind::kCrc32 ? "crc32" : "sha256";
}

FileDigest::FileDigest(FileDigestKind kind) : kind_(kind) {
  if (kind_ == FileDigestKind::kSha256) sha_.emplace();
}

void FileDigest::Update(absl::string_view bytes) {
  if (sha_.has_value()) {
    sha_->Update(bytes);
  } else {
    crc_ = libdeflate_crc32(crc_, bytes.data(), bytes.size());
  }
}

std::string FileDigest::HexDigest() {
  if (sha_.has_value()) return sha_->HexDigest();
  return absl::StrFormat("%08x", crc_);
}

std::string FileDigestHex(FileDigestKind kind, const std::vector<absl::string_view>& pieces) {
  FileDigest digest(kind);
  for (absl::string_view p : pieces) digest.Update(p);
  return digest.HexDigest();
}

}  // namespace spexd::server
