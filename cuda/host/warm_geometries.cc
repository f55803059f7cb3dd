#include "cuda/host/warm_geometries.h"

#include <cstdint>

#include "cuda/kernels/device_types.h"

namespace spexd::cuda {

std::size_t GeometryStateBytes(const core::PatchPlan& plan) {
  const std::size_t stamps = static_cast<std::size_t>(plan.nspec) * plan.fullwave.size();
  const std::size_t stamp_pixels = static_cast<std::size_t>(plan.stamp_ny) * plan.stamp_nx;
  return plan.patches.size() * sizeof(DevicePatch) +
         (plan.xc.size() + plan.yc.size()) * sizeof(int32_t) +
         stamps * stamp_pixels * sizeof(double);
}

int WarmStatesToDrop(const std::vector<std::size_t>& warm_bytes, std::size_t new_bytes,
                     std::size_t free_bytes, std::size_t total_bytes, int max_states) {
  const double reserve = kWarmReserveFraction * static_cast<double>(total_bytes);
  const int n = static_cast<int>(warm_bytes.size());
  int dropped = 0;
  double available = static_cast<double>(free_bytes);
  while (dropped < n &&
         (n - dropped >= max_states || available < static_cast<double>(new_bytes) + reserve)) {
    available += static_cast<double>(warm_bytes[static_cast<std::size_t>(n - 1 - dropped)]);
    ++dropped;
  }
  return dropped;
}

}  // namespace spexd::cuda
