// M = A^T diag(v) A of one patch by 8 x 8 tiles of stamps (spec §2.8), the CPU twin of
// cuda/kernels/normal_equations_dmma.cu: unknowns in tiles of eight consecutive wavelengths of
// one spectrum, each tile's stamps on a canvas of the window pixels they cover (a plane a
// stamp, zero outside it), and M[q, l] for a pair of tiles summed over their
// common box pixel by pixel, eight FMAs a pixel: a broadcast A[p, q] times the vector
// v_p A[p, l0 .. l0 + 7]. Products outside a stamp are exact zeros, so these are the
// overlaps' sums in another order than normal_equations.h's runs (rounding only). The
// AVX-512 and AVX2 copies and the portable one (std::fma in the same order) give the same
// bits.
// b = A^T diag(v) d and fw = A^T v come from the weighted canvases, pixel by pixel in the
// window's order: the bits of the pixel-by-pixel sums. The tiles' geometry is
// core/numerics/stamp_tiles.h, shared with the CUDA kernel.
#ifndef SPEXD_CORE_CPU_INTERNAL_TILE_NORMAL_EQUATIONS_H_
#define SPEXD_CORE_CPU_INTERNAL_TILE_NORMAL_EQUATIONS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/cpu/internal/simd_level.h"
#include "core/numerics/stamp_tiles.h"

namespace spexd::core::internal {

// The patch's stamps: unknown q = s * nt + w (fibre-major) has its stny x stnx values at
// stamp[q] with its lower-left corner at window row oy[q], column ox[q] (stamp rows or
// columns outside the ny x nx window are dropped, spec §2.7); image and ivar are the
// window's [ny][nx].
struct PatchStamps {
  int n, nt, stny, stnx, ny, nx;
  const double* const* stamp;
  const int32_t* oy;
  const int32_t* ox;
  const double* image;
  const double* ivar;
};

// Scratch reused across patches (grow-only).
struct TileScratch {
  std::vector<double> a, w;       // every tile's A canvas (planar); one weighted canvas
  std::vector<PixelBox> box;      // per tile: its box
  std::vector<std::size_t> off;   // per tile: its canvas's offset in a
};

// Writes M[i, j] (i >= j, i - j <= reach, at m[i + j * ld]) for every pair of tiles whose
// stamps share a pixel; entries of other pairs are left as they are (the caller zeroes M
// within reach). Adds b and fw into rhs[0, n), fw[0, n) (the caller zeroes them). `level`:
// kAvx512, kAvx2 (with FMA) or kBaseline (the portable copy); one the CPU lacks falls back.
void TileNormalEquations(const PatchStamps& p, int ld, int reach, double* m, double* rhs,
                         double* fw, TileScratch* scratch, SimdLevel level = WidestSimdLevel());

// Whether this CPU runs TileNormalEquations in vectors (AVX-512, or AVX2 with FMA); the
// portable copy is for tests and other hosts' bits.
bool TileNormalEquationsVectorised();

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_TILE_NORMAL_EQUATIONS_H_
