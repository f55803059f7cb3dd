#include "core/frame/frame_array_pool.h"

#include <utility>

namespace spexd::core {

int64_t FrameArrayPool::ArraySet::bytes() const {
  const std::size_t doubles = flux.capacity() + ivar.capacity() + rdiags.capacity() +
                              pixmask_fraction.capacity() + chi2pix.capacity();
  return static_cast<int64_t>(doubles * sizeof(double) + mask.capacity() * sizeof(uint32_t) +
                              failed_bins.capacity());
}

void FrameArrayPool::Swap(ArraySet& set, Frame& frame) {
  set.flux.swap(frame.flux);
  set.ivar.swap(frame.ivar);
  set.rdiags.swap(frame.rdiags);
  set.pixmask_fraction.swap(frame.pixmask_fraction);
  set.chi2pix.swap(frame.chi2pix);
  set.mask.swap(frame.mask);
  set.failed_bins.swap(frame.failed_bins);
}

void FrameArrayPool::set_max_idle_bytes(int64_t bytes) {
  std::vector<ArraySet> drop;  // freed outside the lock
  absl::MutexLock lock(&mu_);
  max_idle_bytes_ = bytes;
  while (idle_bytes_ > max_idle_bytes_ && !idle_.empty()) {
    idle_bytes_ -= idle_.front().bytes();
    drop.push_back(std::move(idle_.front()));
    idle_.erase(idle_.begin());
  }
}

bool FrameArrayPool::Lend(Frame* frame) {
  ArraySet set;
  {
    absl::MutexLock lock(&mu_);
    if (idle_.empty()) return false;
    set = std::move(idle_.back());
    idle_.pop_back();
    idle_bytes_ -= set.bytes();
    ++lent_;
  }
  Swap(set, *frame);
  return true;
}

void FrameArrayPool::Recycle(Frame* frame) noexcept {
  ArraySet set;
  Swap(set, *frame);
  set.flux.clear();
  set.ivar.clear();
  set.rdiags.clear();
  set.pixmask_fraction.clear();
  set.chi2pix.clear();
  set.mask.clear();
  set.failed_bins.clear();
  const int64_t bytes = set.bytes();
  if (bytes == 0) return;
  absl::MutexLock lock(&mu_);
  if (idle_bytes_ + bytes > max_idle_bytes_) return;  // `set` is freed on return
  idle_bytes_ += bytes;
  idle_.push_back(std::move(set));
}

int64_t FrameArrayPool::idle_bytes() {
  absl::MutexLock lock(&mu_);
  return idle_bytes_;
}

int64_t FrameArrayPool::lent() {
  absl::MutexLock lock(&mu_);
  return lent_;
}

}  // namespace spexd::core
