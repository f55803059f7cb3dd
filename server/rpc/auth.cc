#include "server/rpc/auth.h"

#include <string_view>

namespace spexd::server {
namespace {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

absl::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& expected) {
  if (expected.empty()) return absl::OkStatus();
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  }
  const std::string_view value(it->second.data(), it->second.size());
  constexpr std::string_view kPrefix = "Bearer ";
  if (value.size() < kPrefix.size() || value.substr(0, kPrefix.size()) != kPrefix ||
      !ConstantTimeEquals(value.substr(kPrefix.size()), expected)) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return absl::OkStatus();
}

}  // namespace spexd::server
