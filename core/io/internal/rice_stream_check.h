// A walk over one RICE_1 tile's compressed bytes that reads them exactly as CFITSIO 4.2's
// decoder does (ricecomp.c: fits_rdecomp, _short, _byte) but checks every byte it takes.
// CFITSIO checks for the end of the stream only after each block of pixels, so a corrupt
// tile makes it read past the tile's buffer within a block (its leading-zero loop runs on
// until it meets a non-zero byte), and never checks that the stream holds even its first
// value. Walking the stream first, with the same tile length and parameters CFITSIO will
// use, proves that every byte CFITSIO then reads lies inside the tile.
#ifndef SPEXD_CORE_RICE_STREAM_CHECK_H_
#define SPEXD_CORE_RICE_STREAM_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace spexd::core::internal {

// OK when `stream` decodes to `pixels` values (a whole tile) with blocks of `blocksize`
// pixels (16 or 32) of `bytepix`-byte integers (CFITSIO's choice of decoder: 1, 2, else
// 4), reading no byte past its end; INVALID_ARGUMENT saying where it fails otherwise.
absl::Status CheckRiceStream(absl::string_view stream, std::int64_t pixels, int blocksize,
                             int bytepix);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_RICE_STREAM_CHECK_H_
