#include "core/cuda_module_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

using AbiFn = int (*)();
using CountFn = int (*)(std::string*);
using CreateFn = Backend* (*)(const BackendOptions*, std::string*);

// Opens the module once per process; the handle is never closed (backends created from
// it may live until exit).
void* OpenModule(const BackendOptions& options, std::string* error) {
  std::vector<std::string> candidates;
  if (!options.cuda_module.empty()) {
    candidates.push_back(options.cuda_module);
  } else {
    if (const char* env = std::getenv("SPEXD_CUDA_MODULE")) candidates.emplace_back(env);
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      auto dir = exe.parent_path();
      candidates.push_back((dir / kCudaModuleName).string());
      candidates.push_back((dir / "lib" / kCudaModuleName).string());
      candidates.push_back((dir.parent_path() / "cuda" / kCudaModuleName).string());
      candidates.push_back((dir.parent_path().parent_path() / "cuda" / kCudaModuleName).string());
    }
  }
  std::string tried;
  for (const auto& path : candidates) {
    if (!std::filesystem::exists(path)) {
      tried += absl::StrCat(" ", path, " (absent)");
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return handle;
    const char* err = dlerror();
    tried += absl::StrCat(" ", path, " (", err != nullptr ? err : "dlopen failed", ")");
  }
  *error = absl::StrCat("CUDA module ", kCudaModuleName, " not loaded; tried:", tried);
  return nullptr;
}

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> LoadCudaBackend(const BackendOptions& options) {
  std::string error;
  void* handle = OpenModule(options, &error);
  if (handle == nullptr) return absl::UnavailableError(error);
  auto abi = Symbol<AbiFn>(handle, "spexd_cuda_abi_version");
  auto create = Symbol<CreateFn>(handle, "spexd_cuda_create_backend");
  if (abi == nullptr || create == nullptr) {
    return absl::UnavailableError("CUDA module lacks the spexd_cuda_* entry points");
  }
  if (abi() != kCudaModuleAbiVersion) {
    return absl::UnavailableError(absl::StrCat("CUDA module ABI ", abi(), " != expected ",
                                               kCudaModuleAbiVersion));
  }
  Backend* backend = create(&options, &error);
  if (backend == nullptr) return absl::UnavailableError(error);
  return std::unique_ptr<Backend>(backend);
}

int CudaDeviceCount(const BackendOptions& options, std::string* reason) {
  std::string error;
  void* handle = OpenModule(options, &error);
  if (handle == nullptr) {
    if (reason != nullptr) *reason = error;
    return 0;
  }
  auto count = Symbol<CountFn>(handle, "spexd_cuda_device_count");
  if (count == nullptr) {
    if (reason != nullptr) *reason = "CUDA module lacks spexd_cuda_device_count";
    return 0;
  }
  return count(reason);
}

}  // namespace spexd::core
