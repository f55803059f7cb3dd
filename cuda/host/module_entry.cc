// C ABI of the dlopen()ed module (core/backend/cuda_module_loader.h). Nothing may throw across it,
// and no C++ object crosses it before spexd_cuda_check_host has agreed that the host is
// the same build as this module.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/backend/cuda_module_loader.h"
#include "core/backend/module_identity.h"
#include "cuda/host/cuda_backend.h"

#define SPEXD_MODULE_EXPORT extern "C" __attribute__((visibility("default")))

SPEXD_MODULE_EXPORT int spexd_cuda_check_host(const char* build_id, const char* boundary_checksum,
                                              char* error, std::size_t error_size) {
  try {
    const spexd::core::BuildIdentity host{build_id != nullptr ? build_id : "",
                                          boundary_checksum != nullptr ? boundary_checksum : ""};
    const absl::Status same =
        spexd::core::CheckSameBuild(spexd::core::ThisBuild(), host, "host executable");
    if (same.ok()) return 1;
    spexd::core::CopyMessage(same.message(), error, error_size);
  } catch (const std::exception& e) {
    spexd::core::CopyMessage(e.what(), error, error_size);
  }
  return 0;
}

SPEXD_MODULE_EXPORT int spexd_cuda_device_count(char* error, std::size_t error_size) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    spexd::core::CopyMessage(absl::StrCat("no usable CUDA device: ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"),
                             error, error_size);
    return 0;
  }
  if (count == 0) spexd::core::CopyMessage("no CUDA device visible", error, error_size);
  return count;
}

SPEXD_MODULE_EXPORT spexd::core::Backend* spexd_cuda_create_backend(
    const spexd::core::BackendOptions* options, char* error, std::size_t error_size) {
  try {
    if (spexd_cuda_device_count(error, error_size) == 0) return nullptr;
    auto backend = spexd::cuda::CreateCudaBackend(*options);
    if (!backend.ok()) {
      spexd::core::CopyMessage(backend.status().ToString(), error, error_size);
      return nullptr;
    }
    return backend->release();
  } catch (const std::exception& e) {
    spexd::core::CopyMessage(absl::StrCat("CUDA backend creation failed: ", e.what()), error,
                             error_size);
    return nullptr;
  }
}
