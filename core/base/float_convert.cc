#include "core/base/float_convert.h"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>

namespace spexd::core {
namespace internal {

void FromBigEndianFloat32Scalar(const char* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + 4 * i, 4);
    u = __builtin_bswap32(u);
    std::memcpy(dst + i, &u, 4);
  }
}

void FromBigEndianFloat32Scalar(const char* src, double* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + 4 * i, 4);
    u = __builtin_bswap32(u);
    float f;
    std::memcpy(&f, &u, 4);
    dst[i] = f;
  }
}

void WidenFloat32Scalar(const char* src, double* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, src + 4 * i, 4);
    dst[i] = f;
  }
}

void NarrowToFloat32Scalar(const double* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

uint64_t NarrowToBigEndianFloat32Scalar(const double* src, std::size_t n, char* out) {
  uint64_t s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(src[i]);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    s += u;
    u = __builtin_bswap32(u);
    std::memcpy(out + 4 * i, &u, 4);
  }
  return s;
}

uint64_t ToBigEndianWordsScalar(const char* src, std::size_t n, char* out) {
  uint64_t s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + 4 * i, 4);
    s += u;
    u = __builtin_bswap32(u);
    std::memcpy(out + 4 * i, &u, 4);
  }
  return s;
}

bool FloatConvertUsesAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  return avx2;
}

}  // namespace internal

namespace {

// Reverses the bytes of each 32-bit word of both 128-bit lanes.
#define SPEXD_BSWAP32_BYTES 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12

__attribute__((target("avx2"))) void FromBigEndianAvx2(const char* src, float* dst,
                                                       std::size_t n) {
  const __m256i swap = _mm256_setr_epi8(SPEXD_BSWAP32_BYTES, SPEXD_BSWAP32_BYTES);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4 * i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_shuffle_epi8(v, swap));
  }
  internal::FromBigEndianFloat32Scalar(src + 4 * i, dst + i, n - i);
}

__attribute__((target("avx2"))) void FromBigEndianAvx2(const char* src, double* dst,
                                                       std::size_t n) {
  const __m128i swap = _mm_setr_epi8(SPEXD_BSWAP32_BYTES);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 4 * i));
    _mm256_storeu_pd(dst + i, _mm256_cvtps_pd(_mm_castsi128_ps(_mm_shuffle_epi8(v, swap))));
  }
  internal::FromBigEndianFloat32Scalar(src + 4 * i, dst + i, n - i);
}

__attribute__((target("avx2"))) void WidenAvx2(const char* src, double* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(reinterpret_cast<const float*>(src + 4 * i));
    _mm256_storeu_pd(dst + i, _mm256_cvtps_pd(v));
  }
  internal::WidenFloat32Scalar(src + 4 * i, dst + i, n - i);
}

__attribute__((target("avx2"))) void NarrowAvx2(const double* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, _mm256_cvtpd_ps(_mm256_loadu_pd(src + i)));
  internal::NarrowToFloat32Scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx2"))) uint64_t NarrowBigEndianAvx2(const double* src, std::size_t n,
                                                            char* out) {
  const __m128i swap = _mm_setr_epi8(SPEXD_BSWAP32_BYTES);
  __m256i acc = _mm256_setzero_si256();  // four 64-bit sums of the native words
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128i w = _mm_castps_si128(_mm256_cvtpd_ps(_mm256_loadu_pd(src + i)));
    acc = _mm256_add_epi64(acc, _mm256_cvtepu32_epi64(w));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * i), _mm_shuffle_epi8(w, swap));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] +
         internal::NarrowToBigEndianFloat32Scalar(src + i, n - i, out + 4 * i);
}

__attribute__((target("avx2"))) uint64_t ToBigEndianWordsAvx2(const char* src, std::size_t n,
                                                             char* out) {
  const __m256i swap = _mm256_setr_epi8(SPEXD_BSWAP32_BYTES, SPEXD_BSWAP32_BYTES);
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();  // 64-bit sums
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4 * i));
    lo = _mm256_add_epi64(lo, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(w)));
    hi = _mm256_add_epi64(hi, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(w, 1)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * i), _mm256_shuffle_epi8(w, swap));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(lo, hi));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] +
         internal::ToBigEndianWordsScalar(src + 4 * i, n - i, out + 4 * i);
}

#undef SPEXD_BSWAP32_BYTES

}  // namespace

void FromBigEndianFloat32(const char* src, float* dst, std::size_t n) {
  if (internal::FloatConvertUsesAvx2()) return FromBigEndianAvx2(src, dst, n);
  internal::FromBigEndianFloat32Scalar(src, dst, n);
}

void FromBigEndianFloat32(const char* src, double* dst, std::size_t n) {
  if (internal::FloatConvertUsesAvx2()) return FromBigEndianAvx2(src, dst, n);
  internal::FromBigEndianFloat32Scalar(src, dst, n);
}

void WidenFloat32(const char* src, double* dst, std::size_t n) {
  if (internal::FloatConvertUsesAvx2()) return WidenAvx2(src, dst, n);
  internal::WidenFloat32Scalar(src, dst, n);
}

void NarrowToFloat32(const double* src, float* dst, std::size_t n) {
  if (internal::FloatConvertUsesAvx2()) return NarrowAvx2(src, dst, n);
  internal::NarrowToFloat32Scalar(src, dst, n);
}

uint64_t NarrowToBigEndianFloat32(const double* src, std::size_t n, char* out) {
  if (internal::FloatConvertUsesAvx2()) return NarrowBigEndianAvx2(src, n, out);
  return internal::NarrowToBigEndianFloat32Scalar(src, n, out);
}

uint64_t ToBigEndianWords(const char* src, std::size_t n, char* out) {
  if (internal::FloatConvertUsesAvx2()) return ToBigEndianWordsAvx2(src, n, out);
  return internal::ToBigEndianWordsScalar(src, n, out);
}

uint64_t BigEndianWordSum(const char* bytes, std::size_t n) {
  uint64_t s = 0;
  for (std::size_t i = 0; i < n / 4; ++i) {
    uint32_t w;
    std::memcpy(&w, bytes + 4 * i, 4);
    s += __builtin_bswap32(w);
  }
  return s;
}

}  // namespace spexd::core
