// C ABI of the dlopen()ed module (core/cuda_module_loader.h). Nothing may throw across it.
#include <cuda_runtime_api.h>

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/cuda_module_loader.h"
#include "cuda/cuda_backend.h"

#define SPEXD_MODULE_EXPORT extern "C" __attribute__((visibility("default")))

SPEXD_MODULE_EXPORT int spexd_cuda_abi_version(void) {
  return spexd::core::kCudaModuleAbiVersion;
}

SPEXD_MODULE_EXPORT int spexd_cuda_device_count(std::string* error) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (error != nullptr) {
      *error = absl::StrCat("no usable CUDA device: ", std::string(cudaGetErrorName(err)), " (",
                            std::string(cudaGetErrorString(err)), ")");
    }
    return 0;
  }
  if (count == 0 && error != nullptr) *error = "no CUDA device visible";
  return count;
}

SPEXD_MODULE_EXPORT spexd::core::Backend* spexd_cuda_create_backend(
    const spexd::core::BackendOptions* options, std::string* error) {
  try {
    std::string reason;
    if (spexd_cuda_device_count(&reason) == 0) {
      if (error != nullptr) *error = reason;
      return nullptr;
    }
    auto backend = spexd::cuda::CreateCudaBackend(*options);
    if (!backend.ok()) {
      if (error != nullptr) *error = backend.status().ToString();
      return nullptr;
    }
    return backend->release();
  } catch (const std::exception& e) {
    if (error != nullptr) *error = absl::StrCat("CUDA backend creation failed: ", std::string(e.what()));
    return nullptr;
  }
}
