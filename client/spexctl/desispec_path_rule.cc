#include "client/spexctl/desispec_path_rule.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"

namespace spexd::client {
namespace {

// The devices the CUDA driver sees (0 without a driver or a device), and how that was
// found. The driver is opened for this alone: spexctl links no CUDA library.
int DriverDevices(std::string* how) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) {
    *how = "no CUDA driver (libcuda.so.1)";
    return 0;
  }
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  auto init = reinterpret_cast<Init>(dlsym(cuda, "cuInit"));
  auto count = reinterpret_cast<Count>(dlsym(cuda, "cuDeviceGetCount"));
  int n = 0;
  if (init == nullptr || count == nullptr || init(0) != 0 || count(&n) != 0) n = -1;
  // The library stays loaded: unloading a CUDA driver that was initialised is not safe.
  if (n <= 0) {
    *how = "the CUDA driver reports no usable device";
    return 0;
  }
  *how = absl::StrCat("the CUDA driver sees ", n, " device(s)");
  return n;
}

}  // namespace

int UsableDeviceNodes(const std::string& dev) {
  if (access((dev + "/nvidiactl").c_str(), R_OK | W_OK) != 0) return 0;
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dev, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 6 || name.compare(0, 6, "nvidia") != 0 ||
        name.find_first_not_of("0123456789", 6) != std::string::npos) {
      continue;  // nvidiactl, nvidia-uvm, nvidia-modeset, nvidia-caps ...
    }
    if (access(entry.path().c_str(), R_OK | W_OK) == 0) ++n;
  }
  return n;
}

absl::StatusOr<PathChoice> DesispecPathRule() {
  // desispec.gpu tests the presence of $DESI_NO_GPU, not its value.
  if (std::getenv("DESI_NO_GPU") != nullptr) {
    return PathChoice{core::Compat::kCpu, "$DESI_NO_GPU is set"};
  }
  if (const char* forced = std::getenv("SPEXD_DESI_GPU")) {
    const std::string value = forced;
    if (value != "0" && value != "1") {
      return absl::InvalidArgumentError(
          absl::StrCat("$SPEXD_DESI_GPU must be 0 or 1 (got '", value, "')"));
    }
    return PathChoice{value == "1" ? core::Compat::kGpu : core::Compat::kCpu,
                      absl::StrCat("$SPEXD_DESI_GPU=", value)};
  }
  // Initialising the driver (cuInit) costs a GPU node ~0.45 s of wall time a process (two
  // H200s), about what serving the frame spexctl asks for takes. Where no
  // $CUDA_VISIBLE_DEVICES narrows the devices, the kernel driver's device nodes and the
  // driver library answer without it. No usable node (a CPU node, a container given no
  // GPU, nodes not yet made): the driver is asked, as it is under $CUDA_VISIBLE_DEVICES.
  if (std::getenv("CUDA_VISIBLE_DEVICES") == nullptr) {
    if (const int nodes = UsableDeviceNodes("/dev"); nodes > 0) {
      if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == nullptr) {
        return PathChoice{core::Compat::kCpu, "no CUDA driver (libcuda.so.1)"};
      }
      return PathChoice{core::Compat::kGpu,
                        absl::StrCat("the NVIDIA driver's device nodes show ", nodes, " device(s)")};
    }
  }
  std::string how;
  const bool gpu = DriverDevices(&how) > 0;
  return PathChoice{gpu ? core::Compat::kGpu : core::Compat::kCpu, how};
}

}  // namespace spexd::client
