// Content-derived identifiers: a PSF's id is the SHA-256 of its file bytes, so the same
// file always gets the same id on every replica, and loading it twice is a no-op.
#ifndef SPEXD_SERVER_CONTENT_ID_H_
#define SPEXD_SERVER_CONTENT_ID_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace spexd::server {

// Lower-case hex SHA-256 of `bytes` (64 characters).
std::string Sha256Hex(const std::string& bytes);
// The same of the concatenation of `pieces` (a file held in parts).
std::string Sha256Hex(const std::vector<absl::string_view>& pieces);

// The same, fed piece by piece (a file read in blocks, never held whole).
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(absl::string_view bytes);
  // The hex digest of everything fed; "" on an OpenSSL failure (callers treat it as an
  // error). Once.
  std::string HexDigest();

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
  bool ok_ = false;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_CONTENT_ID_H_
