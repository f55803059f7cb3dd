#include "core/io/plane_buffer.h"

#include <cstdlib>
#include <new>

#include "core/base/prefault.h"

namespace spexd::core::internal {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

PlaneBlock AllocatePlaneBlock(std::size_t bytes) {
  // Whole huge pages, so that the kernel can back the block with them (THP "madvise" mode,
  // the common default) before its first touch faults the pages in one by one.
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  AdviseHugePages(p, rounded);
  return PlaneBlock{p, rounded, nullptr};
}

PlaneCache::~PlaneCache() {
  for (PlaneBlock& b : free_) Free(b);
}

void PlaneCache::Free(PlaneBlock block) {
  if (block.pinned_by != nullptr) block.pinned_by->Unpin(block.data);
  std::free(block.data);
}

PlaneBlock PlaneCache::Take(std::size_t bytes) {
  std::shared_ptr<PlaneMemoryPinner> pinner;
  {
    absl::MutexLock lock(&mu_);
    pinner = pinner_;
    // The smallest cached block that fits (frames of one server are mostly one size).
    std::size_t best = free_.size();
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].bytes >= bytes && (best == free_.size() || free_[i].bytes < free_[best].bytes)) {
        best = i;
      }
    }
    if (best < free_.size()) {
      PlaneBlock b = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      cached_bytes_ -= static_cast<int64_t>(b.bytes);
      ++reused_;
      return b;
    }
  }
  PlaneBlock b = AllocatePlaneBlock(bytes);
  if (pinner != nullptr && pinner->Pin(b.data, b.bytes)) b.pinned_by = std::move(pinner);
  return b;
}

void PlaneCache::Give(PlaneBlock block) {
  {
    absl::MutexLock lock(&mu_);
    // A block pinned by an earlier pinner (or left pageable by a failed Pin) is not kept.
    if (block.pinned_by == pinner_ &&
        cached_bytes_ + static_cast<int64_t>(block.bytes) <= max_cached_bytes_) {
      cached_bytes_ += static_cast<int64_t>(block.bytes);
      free_.push_back(std::move(block));
      return;
    }
  }
  Free(block);
}

int64_t PlaneCache::cached_bytes() {
  absl::MutexLock lock(&mu_);
  return cached_bytes_;
}

void PlaneCache::set_max_cached_bytes(int64_t bytes) {
  std::vector<PlaneBlock> drop;
  {
    absl::MutexLock lock(&mu_);
    max_cached_bytes_ = bytes;
    while (cached_bytes_ > max_cached_bytes_ && !free_.empty()) {
      cached_bytes_ -= static_cast<int64_t>(free_.back().bytes);
      drop.push_back(free_.back());
      free_.pop_back();
    }
  }
  for (PlaneBlock& b : drop) Free(b);
}

void PlaneCache::set_pinner(std::shared_ptr<PlaneMemoryPinner> pinner) {
  std::vector<PlaneBlock> drop;
  {
    absl::MutexLock lock(&mu_);
    drop.swap(free_);
    cached_bytes_ = 0;
  }
  for (PlaneBlock& b : drop) Free(b);
  absl::MutexLock lock(&mu_);
  pinner_ = std::move(pinner);
}

int64_t PlaneCache::reused() {
  absl::MutexLock lock(&mu_);
  return reused_;
}

}  // namespace spexd::core::internal
