#include "server/upload_assembly.h"

#include <algorithm>
#include <utility>

namespace spexd::server {

UploadAssembly::UploadAssembly(int64_t announced, int64_t reserve) : announced_(announced) {
  bytes_.reserve(static_cast<std::size_t>(std::max<int64_t>(0, std::min(announced, reserve))));
}

bool UploadAssembly::Append(absl::string_view chunk) {
  if (static_cast<int64_t>(chunk.size()) > announced_ - received()) return false;
  bytes_.append(chunk.data(), chunk.size());
  return true;
}

std::string UploadAssembly::Take() {
  std::string out = std::move(bytes_);
  bytes_.clear();
  announced_ = 0;
  return out;
}

}  // namespace spexd::server
