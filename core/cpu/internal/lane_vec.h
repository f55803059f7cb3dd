// Vectors of L doubles for the CPU kernels compiled once per instruction set
// (normal_equations.cc, decorrelate_products.cc, lane_eigen.cc): GCC's vector extensions,
// so that each target("avx2") / target("avx512f") copy of an always-inline caller gets
// code of its own width from the same source.
#ifndef SPEXD_CORE_CPU_INTERNAL_LANE_VEC_H_
#define SPEXD_CORE_CPU_INTERNAL_LANE_VEC_H_

#include <cstddef>
#include <utility>

namespace spexd::core::internal {

// aligned(8): vectors read from std::vector<double> rows; may_alias: read as doubles too.
template <int L> struct LaneVec;
template <> struct LaneVec<4> {
  typedef double V __attribute__((vector_size(32), aligned(8), may_alias));
  typedef long long Mask __attribute__((vector_size(32)));
};
template <> struct LaneVec<8> {
  typedef double V __attribute__((vector_size(64), aligned(8), may_alias));
  typedef long long Mask __attribute__((vector_size(64)));
};

// Inlined into each instruction set's copy of its caller.
#define SPEXD_LANE_INLINE inline __attribute__((always_inline))

// Before a loop over a few accumulators or carries (a fixed count, <= 16) that must live in
// registers: GCC's -O2 (the default build, RelWithDebInfo) does not unroll such loops, so
// the values went through the stack, each multiply-add waiting on a store and a reload
// (the eigen-solver's QL 1.3x, its Q 2.5x slower than unrolled).
#define SPEXD_UNROLL_LANES _Pragma("GCC unroll 16")

// x in every lane, as one broadcast at every optimisation level: a shuffle of lane 0. The
// lane-by-lane fill (and an initializer list, or x - V{}) became one masked broadcast per
// lane at -O3 (the Release builds of the benchmarks) or -O1, a chain of L dependent
// instructions in the normal equations' and the eigen-solver's inner loops.
template <int L, std::size_t... I>
SPEXD_LANE_INLINE typename LaneVec<L>::V BroadcastLanes(double x, std::index_sequence<I...>) {
  const typename LaneVec<L>::V v = {x};
  return __builtin_shufflevector(v, v, ((void)I, 0)...);
}
template <int L>
SPEXD_LANE_INLINE typename LaneVec<L>::V Broadcast(double x) {
  return BroadcastLanes<L>(x, std::make_index_sequence<L>{});
}

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_LANE_VEC_H_
