// A RICE_1 tile-compressed 16-bit image (what desispec writes a preproc's MASK as) decoded
// tile by tile on a pool. CFITSIO decodes a compressed HDU's tiles one after another on
// the calling thread: for a DESI CCD's mask, 0.04-0.075 s of one core, the longest piece of a
// frame's load on a host with many cores. Each tile is still decoded by CFITSIO's own
// RICE decoder (fits_rdecomp_short), from the tile table CFITSIO parsed, so the pixels are
// the ones fits_read_pix gives.
#ifndef SPEXD_CORE_RICE_IMAGE_TILES_H_
#define SPEXD_CORE_RICE_IMAGE_TILES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/base/task_pool.h"
#include "core/io/fits_file.h"

namespace spexd::core::internal {

// When the current HDU of `file` is a 2-D RICE_1 image of ZBITPIX 16 with 2-byte values,
// every tile compressed, no scaling or blank columns or keywords, and BSCALE 1 with BZERO 0
// (read as int16) or 32768 (read as uint16): decodes its `pixels` values into `out` with the
// bit patterns fits_read_pix gives for that type (TSHORT, TUSHORT) and returns true. Returns
// false, with `out` untouched, for any other HDU (the caller reads it through CFITSIO), and
// INVALID_ARGUMENT naming the tile when a tile does not decode. The tiles are read from the
// file's own bytes (FitsFile::OpenRawBytes; a file CFITSIO decompressed itself has none:
// false).
absl::StatusOr<bool> DecodeRiceTiles16(FitsFile& file, std::int64_t pixels, std::uint16_t* out,
                                       TaskPool* pool);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_RICE_IMAGE_TILES_H_
