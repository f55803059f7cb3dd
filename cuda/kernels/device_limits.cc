#include "cuda/kernels/device_limits.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>

namespace spexd::cuda {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<std::size_t> g_cap{0};
// Each device's opt-in limit, queried on first use (0: not yet). Read on every launch
// that asks for more than 48 KB, so cached rather than asked again.
std::atomic<std::size_t> g_optin[kMaxDevices];

}  // namespace

void SetSharedMemoryCap(std::size_t bytes) { g_cap.store(bytes); }

std::size_t SharedMemoryPerBlock(int device) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return 0;
  std::size_t optin = device < kMaxDevices ? g_optin[device].load() : 0;
  if (optin == 0) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    optin = static_cast<std::size_t>(v);
    if (device < kMaxDevices) g_optin[device].store(optin);
  }
  const std::size_t cap = g_cap.load();
  return cap > 0 ? std::min(cap, optin) : optin;
}

}  // namespace spexd::cuda
