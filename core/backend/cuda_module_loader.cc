#include "core/backend/cuda_module_loader.h"

#include <dlfcn.h>

#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/backend/module_identity.h"

namespace spexd::core {
namespace {

// Whether this build made a CUDA module (core/CMakeLists.txt sets it from SPEXD_WITH_CUDA and
// nvcc's presence). A module from another build is refused anyway (module_identity.h), so a
// build without one can name the reason instead of the paths it searched.
#ifndef SPEXD_BUILT_WITH_CUDA
#define SPEXD_BUILT_WITH_CUDA 1
#endif
constexpr bool kBuiltWithCuda = SPEXD_BUILT_WITH_CUDA != 0;

using CheckFn = int (*)(const char*, const char*, char*, std::size_t);
using CountFn = int (*)(char*, std::size_t);
using CreateFn = Backend* (*)(const BackendOptions*, char*, std::size_t);

std::vector<std::string> Candidates(const BackendOptions& options) {
  if (!options.cuda_module.empty()) return {options.cuda_module};
  std::vector<std::string> candidates;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path dir = exe.parent_path();
    candidates.push_back((dir / kCudaModuleName).string());
    candidates.push_back((dir / "lib" / kCudaModuleName).string());
    candidates.push_back((dir.parent_path() / "lib" / "spexd" / kCudaModuleName).string());
  }
  return candidates;
}

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// Opens the first module found and checks that it is this build. A handle is never
// closed (backends created from it may live until exit).
absl::StatusOr<void*> OpenModule(const BackendOptions& options) {
  std::string tried;
  for (const std::string& path : Candidates(options)) {
    if (!std::filesystem::exists(path)) {
      absl::StrAppend(&tried, " ", path, " (absent)");
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      absl::StrAppend(&tried, " ", path, " (", err != nullptr ? err : "dlopen failed", ")");
      continue;
    }
    auto check = Symbol<CheckFn>(handle, "spexd_cuda_check_host");
    if (check == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "CUDA module ", path, " has no spexd_cuda_check_host: it is not from this build "
          "(rebuild both, or install both with the same `cmake --install`)"));
    }
    char error[kCudaModuleErrorSize] = {0};
    const BuildIdentity& me = ThisBuild();
    if (check(me.build_id.c_str(), me.boundary_checksum.c_str(), error, sizeof(error)) != 1) {
      return absl::UnavailableError(absl::StrCat("CUDA module ", path, " refused: ", error));
    }
    return handle;
  }
  if (!kBuiltWithCuda) {
    // The reason first; a module named anyway (--cuda_module, $SPEXD_CUDA_MODULE) after it.
    return absl::UnavailableError(absl::StrCat(
        "built without CUDA: this build has no CUDA backend (configure where nvcc is found, "
        "with -DSPEXD_WITH_CUDA=ON, for one)",
        options.cuda_module.empty() ? "" : absl::StrCat("; tried:", tried)));
  }
  return absl::UnavailableError(
      absl::StrCat("CUDA module ", kCudaModuleName, " not loaded; tried:", tried));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> LoadCudaBackend(const BackendOptions& options) {
  absl::StatusOr<void*> handle = OpenModule(options);
  if (!handle.ok()) return handle.status();
  auto create = Symbol<CreateFn>(*handle, "spexd_cuda_create_backend");
  if (create == nullptr) {
    return absl::UnavailableError("CUDA module lacks spexd_cuda_create_backend");
  }
  char error[kCudaModuleErrorSize] = {0};
  Backend* backend = create(&options, error, sizeof(error));
  if (backend == nullptr) {
    // A configuration the module refused (a bad SPEXD_CUDA_* switch, cuda/host/diagnostics.h)
    // keeps its code across the C ABI, which carries only the status text.
    constexpr absl::string_view kInvalid = "INVALID_ARGUMENT: ";
    if (absl::StartsWith(error, kInvalid)) {
      return absl::InvalidArgumentError(absl::string_view(error).substr(kInvalid.size()));
    }
    return absl::UnavailableError(error);
  }
  return std::unique_ptr<Backend>(backend);
}

int CudaDeviceCount(const BackendOptions& options, std::string* reason) {
  absl::StatusOr<void*> handle = OpenModule(options);
  if (!handle.ok()) {
    if (reason != nullptr) *reason = std::string(handle.status().message());
    return 0;
  }
  auto count = Symbol<CountFn>(*handle, "spexd_cuda_device_count");
  if (count == nullptr) {
    if (reason != nullptr) *reason = "CUDA module lacks spexd_cuda_device_count";
    return 0;
  }
  char error[kCudaModuleErrorSize] = {0};
  const int n = count(error, sizeof(error));
  if (n == 0 && reason != nullptr) *reason = error;
  return n;
}

}  // namespace spexd::core
