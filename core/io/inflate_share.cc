#include "core/io/inflate_share.h"

#include <algorithm>

namespace spexd::core {

InflateShare::Claim::~Claim() {
  if (share_ != nullptr) share_->active_.fetch_sub(1, std::memory_order_relaxed);
}

InflateShare::Claim InflateShare::Enter(int threads) {
  const int active = active_.fetch_add(1, std::memory_order_relaxed) + 1;
  // Two chunks at least: the second halves the member's latency for ~1.25x its CPU.
  return Claim(this, std::max(std::min(threads, 2), threads / active));
}

}  // namespace spexd::core
