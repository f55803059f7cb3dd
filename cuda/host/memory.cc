#include "cuda/host/memory.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"

namespace spexd::cuda::internal {
namespace {

absl::Status AllocError(cudaError_t err, std::size_t bytes, const char* what, const char* kind) {
  (void)cudaGetLastError();  // allocation failures are not sticky: clear them
  std::string msg = absl::StrCat("cannot allocate ", bytes, " bytes of ", std::string(kind),
                                 " memory for ", std::string(what), ": ",
                                 std::string(cudaGetErrorString(err)));
  if (err == cudaErrorMemoryAllocation) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      msg = absl::StrCat(msg, " (device has ", free_b >> 20, " MiB free of ", total_b >> 20,
                         " MiB)");
    }
    return absl::ResourceExhaustedError(msg);
  }
  return absl::InternalError(msg);
}

}  // namespace

namespace {
std::atomic<int64_t> g_fault_countdown{0};  // > 0: allocations left until the injected one
std::atomic<bool> g_poison{false};
}  // namespace

void SetAllocationFault(int64_t at) { g_fault_countdown.store(at); }
void SetAllocationPoison(bool on) { g_poison.store(on); }

absl::Status DeviceAllocate(void** ptr, std::size_t bytes, const char* what) {
  std::size_t request = bytes;
  if (g_fault_countdown.load(std::memory_order_relaxed) > 0 && g_fault_countdown.fetch_sub(1) == 1) {
    std::size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    request = bytes + 2 * total_b;  // more than the device has: the driver refuses it
  }
  cudaError_t err = cudaMalloc(ptr, request);
  if (err != cudaSuccess) return AllocError(err, bytes, what, "device");
  if (g_poison.load(std::memory_order_relaxed)) {
    err = cudaMemset(*ptr, 0xFF, bytes);
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
      (void)cudaFree(*ptr);
      *ptr = nullptr;
      return AllocError(err, bytes, what, "device (poisoning)");
    }
  }
  return absl::OkStatus();
}

void DeviceFree(void* ptr) { (void)cudaFree(ptr); }

absl::Status PinnedAllocate(void** ptr, std::size_t bytes, const char* what) {
  cudaError_t err = cudaMallocHost(ptr, bytes);
  if (err != cudaSuccess) return AllocError(err, bytes, what, "pinned host");
  return absl::OkStatus();
}

void PinnedFree(void* ptr) { (void)cudaFreeHost(ptr); }

}  // namespace spexd::cuda::internal
