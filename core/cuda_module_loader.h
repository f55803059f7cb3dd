// Loads the CUDA backend module with dlopen() (toolchain.md §4.1: cuBLAS/cuSOLVER must
// not be linked into executables that run prometheus-cpp's exposer; the module also
// lets one binary run on hosts without CUDA).
#ifndef SPEXD_CORE_CUDA_MODULE_LOADER_H_
#define SPEXD_CORE_CUDA_MODULE_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/backend.h"

namespace spexd::core {

// ABI between the executable and the module. The module exports, with C linkage:
//   int spexd_cuda_abi_version(void);            // == kCudaModuleAbiVersion
//   int spexd_cuda_device_count(std::string* error);
//   Backend* spexd_cuda_create_backend(const BackendOptions* options, std::string* error);
// 2: Backend::Memory and Backend::Release (the vtable changed).
inline constexpr int kCudaModuleAbiVersion = 2;
inline constexpr const char* kCudaModuleName = "libspexd_cuda.so";

// Finds and loads the module: options.cuda_module, $SPEXD_CUDA_MODULE, then
// <exe dir>/, <exe dir>/lib/, <exe dir>/../cuda/. UNAVAILABLE with the dlerror or CUDA
// error text when there is no module, driver or device.
absl::StatusOr<std::unique_ptr<Backend>> LoadCudaBackend(const BackendOptions& options);

// Number of CUDA devices visible through the module (0 with a reason when none).
int CudaDeviceCount(const BackendOptions& options, std::string* reason);

}  // namespace spexd::core

#endif  // SPEXD_CORE_CUDA_MODULE_LOADER_H_
