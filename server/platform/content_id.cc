#include "server/platform/content_id.h"

#include <openssl/evp.h>

#include <memory>

namespace spexd::server {

struct Sha256Stream::Context {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
};

Sha256Stream::Sha256Stream() : ctx_(std::make_unique<Context>()) {
  ok_ = ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md.get(), EVP_sha256(), nullptr) == 1;
}

Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::Update(absl::string_view bytes) {
  ok_ = ok_ && EVP_DigestUpdate(ctx_->md.get(), bytes.data(), bytes.size()) == 1;
}

std::string Sha256Stream::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ok_ = ok_ && EVP_DigestFinal_ex(ctx_->md.get(), digest, &len) == 1;
  if (!ok_) return std::string();
  ok_ = false;  // finalised
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string Sha256Hex(const std::string& bytes) { return Sha256Hex({absl::string_view(bytes)}); }

std::string Sha256Hex(const std::vector<absl::string_view>& pieces) {
  Sha256Stream sha;
  for (absl::string_view p : pieces) sha.Update(p);
  return sha.HexDigest();
}

}  // namespace spexd::server
