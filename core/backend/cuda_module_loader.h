// Loads the CUDA backend module with dlopen(): one binary runs on hosts without CUDA, and
// the CUDA libraries' static TLS (about 150 KiB) stays out of every thread's stack
// (docs/design.md, "Modules").
#ifndef SPEXD_CORE_CUDA_MODULE_LOADER_H_
#define SPEXD_CORE_CUDA_MODULE_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"

namespace spexd::core {

// The module's C entry points. Errors come back as text in the caller's buffer.
//   int spexd_cuda_check_host(const char* build_id, const char* boundary_checksum,
//                             char* error, size_t error_size);   // 1: same build
//   int spexd_cuda_device_count(char* error, size_t error_size);
//   Backend* spexd_cuda_create_backend(const BackendOptions* options, char* error,
//                                      size_t error_size);
// The loader calls spexd_cuda_check_host first with ThisBuild() (core/backend/module_identity.h);
// C++ objects cross the boundary only after the module has agreed that the two are the
// same build.
inline constexpr const char* kCudaModuleName = "libspexd_cuda.so";
inline constexpr std::size_t kCudaModuleErrorSize = 1024;

// Finds and loads the module: options.cuda_module alone when set (programs set it from
// --cuda_module or $SPEXD_CUDA_MODULE), else in order <exe dir>/, <exe dir>/lib/ (a
// relocatable bundle), <exe dir>/../lib/spexd/ (the install tree of `cmake --install`,
// mirrored by the build tree: build/lib/spexd/).
// UNAVAILABLE with the reason when there is no module, it is not this build, or there
// is no driver or device.
absl::StatusOr<std::unique_ptr<Backend>> LoadCudaBackend(const BackendOptions& options);

// Number of CUDA devices visible through the module (0 with a reason when none).
int CudaDeviceCount(const BackendOptions& options, std::string* reason);

}  // namespace spexd::core

#endif  // SPEXD_CORE_CUDA_MODULE_LOADER_H_
