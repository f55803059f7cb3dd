// Storage for decoded image planes that is reused from frame to frame. A 4k x 4k plane is
// 64 MB: far over glibc's mmap threshold, so every std::vector of that size is a fresh
// mapping whose pages the kernel faults in and zeroes on first touch, and which is unmapped
// again when the frame is freed. On a server decoding ten frames a second that is most of
// the decode time. Blocks returned to a PlaneBufferPool are
// handed to the next frame as they are, and new ones are mapped with transparent huge pages
// requested before anything touches them.
#ifndef SPEXD_CORE_PLANE_BUFFER_H_
#define SPEXD_CORE_PLANE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace spexd::core {

class PlaneBufferPool;

// Page-locks the pool's blocks for a device's DMA (a GPU backend's, GpuCapabilities::PlanePinner):
// a frame decoded into pinned planes is copied to the device as it is, with no host
// staging pass on the extraction's critical path. Pinning costs a few ms per 64 MB block,
// once: pooled blocks are reused. Thread-safe; never throws.
class PlaneMemoryPinner {
 public:
  virtual ~PlaneMemoryPinner() = default;
  // Whether [data, data + bytes) is now pinned (false: it stays pageable, still usable).
  virtual bool Pin(void* data, std::size_t bytes) = 0;
  // Undoes a successful Pin, before the block is freed.
  virtual void Unpin(void* data) = 0;
};

namespace internal {

// A block of raw memory (2 MiB-aligned, madvise(MADV_HUGEPAGE)d), freed with std::free
// (after Unpin where it was pinned).
struct PlaneBlock {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<PlaneMemoryPinner> pinned_by;  // null: pageable
};

// The pool's shared state: outlives the pool while buffers drawn from it are alive.
class PlaneCache {
 public:
  explicit PlaneCache(int64_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  ~PlaneCache();
  PlaneBlock Take(std::size_t bytes);
  void Give(PlaneBlock block);
  int64_t cached_bytes();
  int64_t reused();
  void set_max_cached_bytes(int64_t bytes);
  void set_pinner(std::shared_ptr<PlaneMemoryPinner> pinner);

 private:
  void Free(PlaneBlock block);

  absl::Mutex mu_;
  std::shared_ptr<PlaneMemoryPinner> pinner_ ABSL_GUARDED_BY(mu_);
  int64_t max_cached_bytes_ ABSL_GUARDED_BY(mu_);
  std::vector<PlaneBlock> free_ ABSL_GUARDED_BY(mu_);
  int64_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reused_ ABSL_GUARDED_BY(mu_) = 0;
};

PlaneBlock AllocatePlaneBlock(std::size_t bytes);

}  // namespace internal

// An array of n T (trivially copyable), uninitialised when made, that gives its memory back to the pool it came
// from (or frees it) when destroyed; or a part of a block that others share (Part), which
// keeps that block alive. Copies have a block of their own.
template <typename T>
class PlaneBuffer {
 public:
  PlaneBuffer() = default;
  PlaneBuffer(PlaneBuffer&& other) noexcept
      : block_(std::exchange(other.block_, {})),
        size_(std::exchange(other.size_, 0)),
        cache_(std::move(other.cache_)),
        owner_(std::move(other.owner_)) {}
  PlaneBuffer& operator=(PlaneBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      block_ = std::exchange(other.block_, {});
      size_ = std::exchange(other.size_, 0);
      cache_ = std::move(other.cache_);
      owner_ = std::move(other.owner_);
    }
    return *this;
  }
  // A copy has a block of its own (not pooled).
  PlaneBuffer(const PlaneBuffer& other) : PlaneBuffer(Make(other.size_, nullptr)) {
    if (size_ > 0) std::memcpy(block_.data, other.block_.data, size_ * sizeof(T));
  }
  PlaneBuffer& operator=(const PlaneBuffer& other) {
    if (this != &other) *this = PlaneBuffer(other);
    return *this;
  }
  ~PlaneBuffer() { Release(); }

  // n elements from `pool` (null: a block of its own). Throws std::bad_alloc like a vector.
  static PlaneBuffer Make(std::size_t n, PlaneBufferPool* pool);
  // The n elements at `data`, inside memory that `owner` keeps alive (e.g. a plane that
  // lies in a pooled block holding a whole file, shared by the file's reader and the
  // frame: the block goes back to its pool once the last of them is gone). `data` is
  // aligned for T. No memory of its own.
  static PlaneBuffer Part(std::shared_ptr<const void> owner, T* data, std::size_t n);

  T* data() { return static_cast<T*>(block_.data); }
  const T* data() const { return static_cast<const T*>(block_.data); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  // Bytes of the block behind the buffer (at least size() * sizeof(T); a part's own).
  std::size_t capacity_bytes() const { return block_.bytes; }
  // Keeps the first `n` elements (n <= size()); the block stays whole.
  void Shrink(std::size_t n) { size_ = n < size_ ? n : size_; }
  // Frees (or returns) the memory now; the buffer is empty afterwards.
  void Release();
  // The same block and elements as an array of U (of T's size), for a conversion in
  // place; this buffer is empty afterwards.
  template <typename U>
  PlaneBuffer<U> Reinterpret() && {
    static_assert(sizeof(U) == sizeof(T), "an element keeps its size");
    PlaneBuffer<U> out;
    out.block_ = std::exchange(block_, {});
    out.size_ = std::exchange(size_, 0);
    out.cache_ = std::move(cache_);
    out.owner_ = std::move(owner_);
    return out;
  }

 private:
  template <typename U>
  friend class PlaneBuffer;
  internal::PlaneBlock block_;
  std::size_t size_ = 0;
  std::shared_ptr<internal::PlaneCache> cache_;  // null: not pooled
  std::shared_ptr<const void> owner_;            // set: a part of a block it keeps alive
};

// Blocks kept for reuse, up to `max_cached_bytes` of them at a time (the owner sizes it
// for the frames it holds at once: prefetched, extracting, streaming). Thread-safe.
class PlaneBufferPool {
 public:
  explicit PlaneBufferPool(int64_t max_cached_bytes)
      : cache_(std::make_shared<internal::PlaneCache>(max_cached_bytes)) {}
  int64_t cached_bytes() { return cache_->cached_bytes(); }
  // A new bound (blocks cached beyond it are freed as they come back).
  void set_max_cached_bytes(int64_t bytes) { cache_->set_max_cached_bytes(bytes); }
  // Blocks handed out again rather than newly allocated.
  int64_t reused() { return cache_->reused(); }
  // Blocks allocated from now on are pinned with `pinner` (null: none are); blocks
  // already cached are dropped, so that every block handed out later is pinned.
  void set_pinner(std::shared_ptr<PlaneMemoryPinner> pinner) { cache_->set_pinner(std::move(pinner)); }

 private:
  template <typename T>
  friend class PlaneBuffer;
  std::shared_ptr<internal::PlaneCache> cache_;
};

template <typename T>
PlaneBuffer<T> PlaneBuffer<T>::Make(std::size_t n, PlaneBufferPool* pool) {
  PlaneBuffer<T> b;
  if (n == 0) return b;
  const std::size_t bytes = n * sizeof(T);
  if (pool != nullptr) {
    b.cache_ = pool->cache_;
    b.block_ = b.cache_->Take(bytes);
  } else {
    b.block_ = internal::AllocatePlaneBlock(bytes);
  }
  b.size_ = n;
  return b;
}

template <typename T>
PlaneBuffer<T> PlaneBuffer<T>::Part(std::shared_ptr<const void> owner, T* data, std::size_t n) {
  PlaneBuffer<T> b;
  if (n == 0) return b;
  b.block_ = internal::PlaneBlock{data, n * sizeof(T), nullptr};
  b.size_ = n;
  b.owner_ = std::move(owner);
  return b;
}

template <typename T>
void PlaneBuffer<T>::Release() {
  if (owner_ != nullptr) {
    owner_.reset();  // the block is the owner's
  } else if (block_.data != nullptr) {
    if (cache_ != nullptr) {
      cache_->Give(block_);
    } else {
      std::free(block_.data);
    }
  }
  block_ = {};
  size_ = 0;
  cache_.reset();
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_PLANE_BUFFER_H_
