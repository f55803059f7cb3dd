#include "core/io/internal/plane_decode.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace spexd::core {
namespace {

// Pixels converted per read from disk: a 256 KiB (float32) buffer that stays in cache
// between the read and the conversion.
constexpr int64_t kBlockPixels = int64_t{1} << 16;

template <typename Out>
void ConvertFloat32One(const char* src, Out* dst) {
  uint32_t u;
  std::memcpy(&u, src, 4);
  u = __builtin_bswap32(u);
  float f;
  std::memcpy(&f, &u, 4);
  *dst = static_cast<Out>(f);
}

// Groups of a fixed size, which the compiler vectorises (-O2), then the rest.
template <typename Out>
void ConvertFloat32(const char* src, Out* dst, int64_t n) {
  constexpr int64_t kGroup = 64;
  int64_t i = 0;
  for (; i + kGroup <= n; i += kGroup) {
    for (int64_t j = i; j < i + kGroup; ++j) ConvertFloat32One(src + 4 * j, dst + j);
  }
  for (; i < n; ++i) ConvertFloat32One(src + 4 * i, dst + i);
}

void ConvertFloat64(const char* src, double* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint64_t u;
    std::memcpy(&u, src + 8 * i, 8);
    u = __builtin_bswap64(u);
    std::memcpy(&dst[i], &u, 8);
  }
}

template <typename Out>
void Convert(int bitpix, const char* src, Out* dst, int64_t n) {
  if constexpr (std::is_same_v<Out, double>) {
    if (bitpix == -64) return ConvertFloat64(src, dst, n);
  }
  ConvertFloat32(src, dst, n);
}

}  // namespace

template <typename Out>
absl::Status DecodeRawChunk(const FitsFile::RawBytes& bytes, const FitsFile::RawFloatImage& raw,
                            int chunk, Out* out) {
  const int64_t first = int64_t{chunk} * kDecodeChunkPixels;
  return DecodeRawRange(bytes, raw, first, std::min(raw.pixels, first + kDecodeChunkPixels), out);
}

template <typename Out>
absl::Status DecodeRawRange(const FitsFile::RawBytes& bytes, const FitsFile::RawFloatImage& raw,
                            int64_t first, int64_t end, Out* out) {
  if (std::is_same_v<Out, float> && raw.bitpix != -32) {
    return absl::InternalError("a float64 plane cannot be kept as float32");
  }
  const int64_t size = raw.bitpix == -32 ? 4 : 8;
  thread_local std::vector<char> buffer;
  for (int64_t p = first; p < end; p += kBlockPixels) {
    const int64_t n = std::min(kBlockPixels, end - p);
    const int64_t offset = raw.data_offset + p * size;
    const std::size_t nbytes = static_cast<std::size_t>(n * size);
    const char* src = bytes.Direct(offset, nbytes);
    if (src == nullptr) {
      if (buffer.size() < nbytes) buffer.resize(static_cast<std::size_t>(kBlockPixels * 8));
      absl::Status read = bytes.Read(offset, nbytes, buffer.data());
      if (!read.ok()) return read;
      src = buffer.data();
    }
    Convert(raw.bitpix, src, out + p, n);
  }
  return absl::OkStatus();
}

template absl::Status DecodeRawChunk<float>(const FitsFile::RawBytes&, const FitsFile::RawFloatImage&,
                                            int, float*);
template absl::Status DecodeRawChunk<double>(const FitsFile::RawBytes&,
                                             const FitsFile::RawFloatImage&, int, double*);
template absl::Status DecodeRawRange<float>(const FitsFile::RawBytes&,
                                            const FitsFile::RawFloatImage&, int64_t, int64_t, float*);
template absl::Status DecodeRawRange<double>(const FitsFile::RawBytes&,
                                             const FitsFile::RawFloatImage&, int64_t, int64_t,
                                             double*);

}  // namespace spexd::core
