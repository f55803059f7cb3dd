// Opens another process's device allocation from its CUDA IPC handle: the
// core::ImportedRegion of the CUDA backend. Plain C++ header.
#ifndef SPEXD_CUDA_IPC_REGION_H_
#define SPEXD_CUDA_IPC_REGION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/backend/device_region.h"

namespace spexd::cuda {

// Maps `ipc_handle` (core::kCudaIpcHandleBytes bytes from cudaIpcGetMemHandle) on
// `device`, which must be the device the allocation lives on, and checks that the
// allocation holds at least `size` bytes from its base. Sets the calling thread's device.
// Statuses as core::GpuCapabilities::ImportRegion.
absl::StatusOr<std::unique_ptr<core::ImportedRegion>> OpenIpcRegion(const std::string& ipc_handle,
                                                                    int device, uint64_t size);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_IPC_REGION_H_
