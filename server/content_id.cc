#include "server/content_id.h"

#include <openssl/evp.h>

#include <memory>

namespace spexd::server {

std::string Sha256Hex(const std::string& bytes) { return Sha256Hex({absl::string_view(bytes)}); }

std::string Sha256Hex(const std::vector<absl::string_view>& pieces) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
  for (absl::string_view p : pieces) {
    ok = ok && EVP_DigestUpdate(ctx.get(), p.data(), p.size()) == 1;
  }
  ok = ok && EVP_DigestFinal_ex(ctx.get(), digest, &len) == 1;
  if (!ok) return std::string();  // only on an OpenSSL failure; callers treat "" as an error
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace spexd::server
