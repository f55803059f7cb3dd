// Move-only owners of device and pinned host memory (docs/design.md "Conventions"). The raw
// cudaMalloc/cudaFree calls live in memory.cc only. Allocation is explicit (Allocate
// returns a Status: RESOURCE_EXHAUSTED when the device is full), never in the hot path.
#ifndef SPEXD_CUDA_MEMORY_H_
#define SPEXD_CUDA_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"

namespace spexd::cuda {
namespace internal {
absl::Status DeviceAllocate(void** ptr, std::size_t bytes, const char* what);
// Test-only (fault_injection.h): the `at`-th DeviceAllocate from now on requests more
// than the device's memory, so that the driver itself fails it. 0 disarms.
void SetAllocationFault(int64_t at);
// Test-only (fault_injection.h, poison_allocations): while on, every DeviceAllocate fills
// its memory with 0xFF bytes (NaN doubles, -1 integers) before returning it.
void SetAllocationPoison(bool on);
void DeviceFree(void* ptr);
absl::Status PinnedAllocate(void** ptr, std::size_t bytes, const char* what);
void PinnedFree(void* ptr);
}  // namespace internal

// `count` elements of T in device memory. Not initialised. Freed by the destructor, which
// does not synchronise (cudaFree waits for the device implicitly).
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) {
    o.ptr_ = nullptr;
    o.count_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  ~DeviceBuffer() { Reset(); }

  // Replaces the buffer with one of `count` elements (a no-op when already that large
  // and `exact` is false). `what` names the buffer in out-of-memory errors.
  absl::Status Allocate(std::size_t count, const char* what, bool exact = false) {
    if (!exact && count <= count_ && ptr_ != nullptr) return absl::OkStatus();
    Reset();
    if (count == 0) return absl::OkStatus();
    void* p = nullptr;
    absl::Status s = internal::DeviceAllocate(&p, count * sizeof(T), what);
    if (!s.ok()) return s;
    ptr_ = static_cast<T*>(p);
    count_ = count;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_ != nullptr) internal::DeviceFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

// `count` elements of T in page-locked host memory (source/target of async copies).
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) {
    o.ptr_ = nullptr;
    o.count_ = 0;
  }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  ~PinnedBuffer() { Reset(); }

  absl::Status Allocate(std::size_t count, const char* what) {
    if (count <= count_ && ptr_ != nullptr) return absl::OkStatus();
    Reset();
    if (count == 0) return absl::OkStatus();
    void* p = nullptr;
    absl::Status s = internal::PinnedAllocate(&p, count * sizeof(T), what);
    if (!s.ok()) return s;
    ptr_ = static_cast<T*>(p);
    count_ = count;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_ != nullptr) internal::PinnedFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* get() const { return ptr_; }
  T& operator[](std::size_t i) const { return ptr_[i]; }
  std::size_t size() const { return count_; }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_MEMORY_H_
