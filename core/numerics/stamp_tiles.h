// The tiles of stamps by which both backends sum the normal equations M = A^T N A
// (extraction-spec §2.7-2.8; cuda/kernels/normal_equations_dmma.cu on the FP64 tensor cores,
// core/cpu/internal/tile_normal_equations.h with FMAs): a patch's unknowns q = s * nt + w
// in tiles of kStampTile consecutive wavelengths of one spectrum (the last of a spectrum
// shorter), each tile's stamps bounded by a box of window pixels, and M[q, l] of two tiles
// summed over the intersection of their boxes. One definition of that geometry, built by
// the host compiler and by nvcc alike.
#ifndef SPEXD_CORE_NUMERICS_STAMP_TILES_H_
#define SPEXD_CORE_NUMERICS_STAMP_TILES_H_

#include <climits>

#include "core/numerics/host_device.h"

namespace spexd::core {

// The side of the tiles: the m8n8 of the tensor cores' FP64 products, one AVX-512 vector.
inline constexpr int kStampTile = 8;

// Tiles a spectrum of nt wavelengths takes, and the wavelengths of its tile t.
SPEXD_HD int StampTilesPerSpectrum(int nt) { return (nt + kStampTile - 1) / kStampTile; }
SPEXD_HD int StampTileCount(int nt, int t) {
  const int left = nt - t * kStampTile;
  return left < kStampTile ? left : kStampTile;
}

// [y0, y1) x [x0, x1) in window pixels; empty where either range is.
struct PixelBox {
  int y0, y1, x0, x1;
};
inline constexpr PixelBox kNoPixels{INT_MAX, INT_MIN, INT_MAX, INT_MIN};  // union's start

SPEXD_HD bool IsEmpty(const PixelBox& b) { return b.y0 >= b.y1 || b.x0 >= b.x1; }
SPEXD_HD PixelBox Intersect(const PixelBox& a, const PixelBox& b) {
  return PixelBox{a.y0 > b.y0 ? a.y0 : b.y0, a.y1 < b.y1 ? a.y1 : b.y1,
                  a.x0 > b.x0 ? a.x0 : b.x0, a.x1 < b.x1 ? a.x1 : b.x1};
}
// b grown to cover a stamp of ny x nx pixels with its lower-left corner at (oy, ox).
SPEXD_HD PixelBox WithStamp(const PixelBox& b, int oy, int ox, int ny, int nx) {
  return PixelBox{b.y0 < oy ? b.y0 : oy, b.y1 > oy + ny ? b.y1 : oy + ny,
                  b.x0 < ox ? b.x0 : ox, b.x1 > ox + nx ? b.x1 : ox + nx};
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_NUMERICS_STAMP_TILES_H_
