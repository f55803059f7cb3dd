// The check of a tile-compressed image HDU (a binary table with ZIMAGE = T, FITS standard
// 4.0 §10) made before CFITSIO decodes it, as part of CheckFitsLayout (fits_layout.h).
// CFITSIO 4.2.0 trusts the compression keywords and each codec's stream: a RICE_1 tile with
// BLOCKSIZE 0 divides by zero, a dithered float tile with ZDITHER0 outside 1..10000 indexes
// its random table out of bounds, an HCOMPRESS_1 stream whose header claims more pixels than
// its tile writes past the tile's buffer. So every parameter CFITSIO reads is
// checked here, every tile's stream is checked against its tile, and codecs that DESI files
// never use are refused (docs/service.md, "Input files and their limits").
#ifndef SPEXD_CORE_COMPRESSED_HDU_CHECK_H_
#define SPEXD_CORE_COMPRESSED_HDU_CHECK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/io/internal/fits_layout.h"

namespace spexd::core::internal {

// A binary-table HDU whose structural keywords and TFORMn the layout walk has checked:
// its data lie inside the file, its rows are `row_bytes` wide, and its columns start at
// `column_offsets` within a row.
struct CheckedBinaryTable {
  const std::map<std::string, std::string>* cards = nullptr;  // value field of each "KEY = "
  std::int64_t data_start = 0;  // file offset of the first row
  std::int64_t row_bytes = 0;   // NAXIS1
  std::int64_t rows = 0;        // NAXIS2
  std::int64_t heap_bytes = 0;  // PCOUNT: the heap and any gap before it
  std::vector<std::int64_t> column_offsets;  // of column n + 1
  const std::vector<std::string>* repeated = nullptr;  // keywords given more than once
};

// OK, or INVALID_ARGUMENT saying which keyword, column or tile is wrong (the caller names
// the file and HDU). Accepted codecs (ZCMPTYPE, any case, as CFITSIO reads it): RICE_1 (and
// its alias RICE_ONE), GZIP_1, GZIP_2, what desispec and fpack write for DESI files;
// HCOMPRESS_1, PLIO_1, BZIP2_1, NOCOMPRESS and anything else are refused. Reads each tile's bytes through `read` (RICE tiles are walked, gzip
// tiles inflated with their output capped at the tile's size: CPU time in proportion to
// the image, no memory beyond one tile's stream).
//
// CFITSIO keeps one quantization setting per open file and sets it to "lossless" for a
// float HDU without ZSCALE/ZZERO columns (or ZQUANTIZ = 'NONE'), but never back when it
// moves to a quantized HDU: that HDU is then decoded as lossless floats (wrong pixels).
// `*quantization` says which of the two this HDU is, for the caller to refuse a file that
// holds both.
enum class TileQuantization { kNone, kSetsLossless, kQuantizedFloat };
absl::Status CheckCompressedImage(const CheckedBinaryTable& table, FitsByteReader read,
                                  TileQuantization* quantization);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_COMPRESSED_HDU_CHECK_H_
