// Which copy of a CPU kernel compiled for several instruction sets runs here
// (normal_equations.cc, decorrelate_products.cc): the widest the CPU supports, or a
// narrower one a test asks for.
#ifndef SPEXD_CORE_CPU_INTERNAL_SIMD_LEVEL_H_
#define SPEXD_CORE_CPU_INTERNAL_SIMD_LEVEL_H_

namespace spexd::core::internal {

enum class SimdLevel { kBaseline, kAvx2, kAvx512 };

// AVX-512F, else AVX2, else baseline (x86-64; baseline elsewhere). Decided once.
SimdLevel WidestSimdLevel();

// Whether this CPU runs `level` (baseline always).
inline bool SimdLevelAvailable(SimdLevel level) {
  return static_cast<int>(level) <= static_cast<int>(WidestSimdLevel());
}

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_SIMD_LEVEL_H_
