// The bulk float conversions of a served frame's host path: FITS planes
// in (big-endian float32), results out to the wire (float32) and to the frame file
// (big-endian float32). Each is a plain loop that the compiler leaves scalar at -O2 (a
// byte swap or a narrowing per value); on a CPU with AVX2 they run 4 or 8 values a step.
// Every function gives the bits of its scalar loop (the conversions round as
// static_cast does, under the same MXCSR), whichever path runs: tests compare the two.
#ifndef SPEXD_CORE_BASE_FLOAT_CONVERT_H_
#define SPEXD_CORE_BASE_FLOAT_CONVERT_H_

#include <cstddef>
#include <cstdint>

namespace spexd::core {

// `n` big-endian float32 values at `src` (any alignment) as native float or double.
void FromBigEndianFloat32(const char* src, float* dst, std::size_t n);
void FromBigEndianFloat32(const char* src, double* dst, std::size_t n);

// `n` little-endian float32 values at `src` (any alignment) widened to double (exact).
void WidenFloat32(const char* src, double* dst, std::size_t n);

// `n` doubles rounded to float (round to nearest even, as static_cast<float>).
void NarrowToFloat32(const double* src, float* dst, std::size_t n);

// `n` doubles rounded to float and written big-endian at `out` (4 n bytes); returns the
// sum of the 32-bit words as written (read big-endian), for a FITS checksum. n < 2^32.
uint64_t NarrowToBigEndianFloat32(const double* src, std::size_t n, char* out);

// The exact sum of the n / 4 big-endian 32-bit words at `bytes` (any alignment; n / 4 <
// 2^32): what NarrowToBigEndianFloat32 returns for the words it writes.
uint64_t BigEndianWordSum(const char* bytes, std::size_t n);

// `n` native (little-endian) 32-bit words at `src` (any alignment) written big-endian at
// `out` (4 n bytes); returns the sum of the words, for a FITS checksum. n < 2^32. A client
// writes the float32 arrays it is streamed this way.
uint64_t ToBigEndianWords(const char* src, std::size_t n, char* out);

namespace internal {
// The scalar loops (the reference, and the path without AVX2), and whether the AVX2 path
// is taken on this CPU (tests compare the two).
void FromBigEndianFloat32Scalar(const char* src, float* dst, std::size_t n);
void FromBigEndianFloat32Scalar(const char* src, double* dst, std::size_t n);
void WidenFloat32Scalar(const char* src, double* dst, std::size_t n);
void NarrowToFloat32Scalar(const double* src, float* dst, std::size_t n);
uint64_t NarrowToBigEndianFloat32Scalar(const double* src, std::size_t n, char* out);
uint64_t ToBigEndianWordsScalar(const char* src, std::size_t n, char* out);
bool FloatConvertUsesAvx2();
}  // namespace internal

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_FLOAT_CONVERT_H_
