// Vectors of L doubles for the CPU kernels compiled once per instruction set
// (normal_equations.cc, decorrelate_products.cc, lane_eigen.cc): GCC's vector extensions,
// so that each target("avx2") / target("avx512f") copy of an always-inline caller gets
// code of its own width from the same source.
#ifndef SPEXD_CORE_CPU_INTERNAL_LANE_VEC_H_
#define SPEXD_CORE_CPU_INTERNAL_LANE_VEC_H_

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
// (the eigen-solver's QL 1.3x, its Q 2.5x slower than unrolled; issue 25, session 21).
#define SPEXD_UNROLL_LANES _Pragma("GCC unroll 16")

// x in every lane. The lane-by-lane fill compiles to one broadcast at -O2 (an initializer
// list, or x - V{}, to a masked load per lane); the zeroing first keeps GCC's
// -Wmaybe-uninitialized quiet at the sanitizer builds' -O1, and -O2 drops it.
template <int L>
SPEXD_LANE_INLINE typename LaneVec<L>::V Broadcast(double x) {
  typename LaneVec<L>::V v = {};
  for (int i = 0; i < L; ++i) v[i] = x;
  return v;
}

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_LANE_VEC_H_
