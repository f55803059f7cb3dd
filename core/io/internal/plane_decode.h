// Decoding a plain float image HDU (FitsFile::RawFloatImage) outside CFITSIO: big-endian
// IEEE values byte-swapped and converted in chunks that threads take independently. The
// values are exactly those CFITSIO's fits_read_pix gives for the same pixels (float32 ->
// float64 is exact; NaN and Inf pass through as they do there without a null value), which
// tests/core/io/plane_decode_test.cc checks bit for bit.
#ifndef SPEXD_CORE_PLANE_DECODE_H_
#define SPEXD_CORE_PLANE_DECODE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/io/fits_file.h"

namespace spexd::core {

// Pixels per chunk: 1 MiB of float32, small enough to balance a 17 M-pixel plane over 16
// threads, large enough that taking a chunk costs nothing.
inline constexpr int64_t kDecodeChunkPixels = int64_t{1} << 18;

inline int DecodeChunks(int64_t pixels) {
  return static_cast<int>((pixels + kDecodeChunkPixels - 1) / kDecodeChunkPixels);
}

// Decodes chunk `chunk` (pixels [chunk * kDecodeChunkPixels, ...) of the plane) into `out`
// (the whole plane's array, raw.pixels entries). Out is float (only for raw.bitpix -32:
// kept as stored) or double. Thread-safe for distinct chunks. INVALID_ARGUMENT when the
// file ends early.
template <typename Out>
absl::Status DecodeRawChunk(const FitsFile::RawBytes& bytes, const FitsFile::RawFloatImage& raw,
                            int chunk, Out* out);
// The same for pixels [first, end) of the plane (0 <= first <= end <= raw.pixels).
template <typename Out>
absl::Status DecodeRawRange(const FitsFile::RawBytes& bytes, const FitsFile::RawFloatImage& raw,
                            int64_t first, int64_t end, Out* out);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PLANE_DECODE_H_
