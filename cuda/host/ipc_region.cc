// The mapping's lifetime is this object's: cudaIpcCloseMemHandle in the destructor. The
// producer must not cudaFree the allocation while it is mapped here (undefined behaviour
// in CUDA), which is why UnregisterCudaRegion returns only after the close
// (server/state/region_registry.h).
#include "cuda/host/ipc_region.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/status_macros.h"
#include "cuda/host/cuda_check.h"

namespace spexd::cuda {
namespace {

// cuMemGetAddressRange through the runtime's driver entry point, so that the module
// needs no link against libcuda (it must load on hosts without a driver).
using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

absl::StatusOr<std::size_t> AllocationBytesFrom(void* base) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    (void)cudaGetLastError();
    return absl::InternalError("cuMemGetAddressRange is not available from the driver");
  }
  CUdeviceptr alloc_base = 0;
  size_t alloc_bytes = 0;
  const CUresult rc = reinterpret_cast<AddressRangeFn>(fn)(
      &alloc_base, &alloc_bytes, reinterpret_cast<CUdeviceptr>(base));
  if (rc != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuMemGetAddressRange failed (CUresult ", rc, ")"));
  }
  // The handle maps the whole allocation from its base.
  return alloc_bytes - static_cast<std::size_t>(reinterpret_cast<CUdeviceptr>(base) - alloc_base);
}

class IpcRegion final : public core::ImportedRegion {
 public:
  IpcRegion(int device, uint64_t size, void* base) : device_(device), size_(size), base_(base) {}
  ~IpcRegion() override {
    absl::MutexLock lock(&mu_);  // no writer is left; the lock documents who owns stream_
    (void)cudaSetDevice(device_);
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
    (void)cudaIpcCloseMemHandle(base_);
    (void)cudaGetLastError();
  }

  absl::Status CreateStream() {
    absl::MutexLock lock(&mu_);
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return absl::OkStatus();
  }

  int device() const override { return device_; }
  uint64_t size() const override { return size_; }
  void* data() const override { return base_; }

  absl::Status WriteFromHost(uint64_t offset, const void* src, std::size_t bytes) override {
    return WriteManyFromHost({HostWrite{offset, src, bytes}});
  }

  absl::Status WriteManyFromHost(const std::vector<HostWrite>& writes) override {
    std::size_t total = 0;
    for (const HostWrite& w : writes) {
      if (w.offset > size_ || w.bytes > size_ - w.offset) {
        return absl::OutOfRangeError(absl::StrCat("write of ", w.bytes, " bytes at offset ", w.offset,
                                                  " leaves the region of ", size_, " bytes"));
      }
      total += w.bytes;
    }
    if (total == 0) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    SPEXD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    for (const HostWrite& w : writes) {
      if (w.bytes == 0) continue;
      SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<unsigned char*>(base_) + w.offset, w.src,
                                                 w.bytes, cudaMemcpyHostToDevice, stream_));
    }
    // Complete on the device before the client is told (a pageable copy may return
    // early); once for all the writes.
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

 private:
  const int device_;
  const uint64_t size_;
  void* const base_;
  absl::Mutex mu_;  // one copy at a time on the region's stream
  cudaStream_t stream_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<core::ImportedRegion>> OpenIpcRegion(const std::string& ipc_handle,
                                                                    int device, uint64_t size) {
  if (ipc_handle.size() != sizeof(cudaIpcMemHandle_t)) {
    return absl::InvalidArgumentError(absl::StrCat("a CUDA IPC handle has ", sizeof(cudaIpcMemHandle_t),
                                                   " bytes, not ", ipc_handle.size()));
  }
  SPEXD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, ipc_handle.data(), sizeof(handle));
  void* base = nullptr;
  const cudaError_t err = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    // A handle of freed memory, of an exited process, or from another node or container.
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open the CUDA IPC handle on device ", device, ": ", cudaGetErrorName(err), " (",
        cudaGetErrorString(err), "); stale handle (memory freed, producer exited) or not from this node"));
  }
  auto region = std::make_unique<IpcRegion>(device, size, base);
  cudaPointerAttributes attr{};
  SPEXD_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attr, base));
  if (attr.device != device) {
    return absl::FailedPreconditionError(absl::StrCat("the region's memory is on device ", attr.device,
                                                      ", not on device ", device,
                                                      " as registered"));
  }
  absl::StatusOr<std::size_t> available = AllocationBytesFrom(base);
  if (!available.ok()) return available.status();
  if (*available < size) {
    return absl::FailedPreconditionError(absl::StrCat("region too small: the allocation has ", *available,
                                                      " bytes, ", size, " were registered"));
  }
  SPEXD_RETURN_IF_ERROR(region->CreateStream());
  return region;
}

}  // namespace spexd::cuda
