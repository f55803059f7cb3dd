#include "core/frame/bundle_array_pool.h"

#include <utility>

namespace spexd::core {

std::shared_ptr<BundleArrayPool> BundleArrayPool::Create(int64_t max_idle_bytes) {
  return std::shared_ptr<BundleArrayPool>(new BundleArrayPool(max_idle_bytes));
}

int64_t BundleArrayPool::ArraySet::bytes() const {
  const std::size_t doubles = flux.capacity() + ivar.capacity() + rdiags.capacity() +
                              pixmask_fraction.capacity() + chi2pix.capacity();
  return static_cast<int64_t>(doubles * sizeof(double) + failed_bins.capacity());
}

bool BundleArrayPool::Lend(BundleResult* b, std::size_t bins, std::size_t resolution_rows) {
  const std::size_t values = bins * resolution_rows;
  ArraySet set;
  {
    absl::MutexLock lock(&mu_);
    if (idle_.empty()) {
      ++stats_.missed;
    } else {
      std::size_t pick = idle_.size() - 1;
      for (std::size_t i = idle_.size(); i-- > 0;) {
        const ArraySet& s = idle_[i];
        if (s.flux.capacity() >= bins && s.rdiags.capacity() >= values) {
          pick = i;
          break;
        }
      }
      set = std::move(idle_[pick]);
      idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(pick));
      idle_bytes_ -= set.bytes();
      ++stats_.lent;
    }
  }
  // Set before the arrays: a bundle the pool lent nothing still brings its new arrays back.
  b->recycler = shared_from_this();
  if (set.bytes() == 0) return false;
  b->flux.swap(set.flux);
  b->ivar.swap(set.ivar);
  b->rdiags.swap(set.rdiags);
  b->pixmask_fraction.swap(set.pixmask_fraction);
  b->chi2pix.swap(set.chi2pix);
  b->failed_bins.swap(set.failed_bins);
  return true;  // `set` now holds the bundle's former (empty) arrays
}

void BundleArrayPool::Recycle(BundleResult& b) noexcept {
  ArraySet set;
  set.flux.swap(b.flux);
  set.ivar.swap(b.ivar);
  set.rdiags.swap(b.rdiags);
  set.pixmask_fraction.swap(b.pixmask_fraction);
  set.chi2pix.swap(b.chi2pix);
  set.failed_bins.swap(b.failed_bins);
  const int64_t bytes = set.bytes();
  if (bytes == 0) return;  // moved away by a consumer: nothing to keep
  {
    absl::MutexLock lock(&mu_);
    if (idle_bytes_ + bytes <= max_idle_bytes_) {
      try {
        idle_.push_back(std::move(set));
        idle_bytes_ += bytes;
        ++stats_.recycled;
        return;
      } catch (...) {  // no memory for the list itself: the arrays are freed instead
      }
    }
    ++stats_.dropped;
  }
  // Over the idle bound: `set`'s arrays are freed here, outside the lock.
}

BundleArrayPool::Stats BundleArrayPool::stats() {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.idle_bytes = idle_bytes_;
  s.idle_sets = static_cast<int>(idle_.size());
  return s;
}

}  // namespace spexd::core
