#include "core/cpu/internal/simd_level.h"

namespace spexd::core::internal {

SimdLevel WidestSimdLevel() {
#if defined(__x86_64__)
  static const SimdLevel widest = __builtin_cpu_supports("avx512f") ? SimdLevel::kAvx512
                                  : __builtin_cpu_supports("avx2")  ? SimdLevel::kAvx2
                                                                    : SimdLevel::kBaseline;
  return widest;
#else
  return SimdLevel::kBaseline;
#endif
}

}  // namespace spexd::core::internal
