// The per-pixel input rules (core/numerics/pixel_rules.h) over ranges of whole planes, as
// the preproc reader applies them while it decodes (each chunk while it is in cache) and
// ApplyPixelRules afterwards: float32 or float64 planes, groups the rules keep only read.
#ifndef SPEXD_CORE_IO_INTERNAL_PLANE_RULES_H_
#define SPEXD_CORE_IO_INTERNAL_PLANE_RULES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/io/internal/plane_decode.h"
#include "core/numerics/pixel_rules.h"

namespace spexd::core {

constexpr std::size_t kRulesGroup = 64;

// Whether the rules keep all kRulesGroup float32 pixels from `image`, `ivar` (and `mask`,
// may be null) as they are; false may also mean "not known" (float64 planes: not tested).
template <typename T>
bool GroupKept(uint16_t bad_bits, const uint16_t* mask, const T* image, const T* ivar) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    uint32_t flags = 0;
    for (std::size_t j = 0; j < kRulesGroup; ++j) {
      uint32_t image_bits, ivar_bits;
      std::memcpy(&image_bits, image + j, 4);
      std::memcpy(&ivar_bits, ivar + j, 4);
      flags |= Float32RuleFlags(image_bits, ivar_bits);
    }
    uint16_t bits = 0;
    if (mask != nullptr) {
      for (std::size_t j = 0; j < kRulesGroup; ++j) bits |= mask[j];
    }
    return (flags >> 31) == 0 && (bits & bad_bits) == 0;
  }
}

// The rules on pixels [lo, hi) of planes of type T, through float64 values: for float32
// planes every result is the pixel's value or 0, so narrowing it back is exact and the
// planes hold what the float64 path computes. Groups the rules keep are only read (most
// are: a value written back would be the same bits).
template <typename T>
void ApplyRulesRange(uint16_t bad_bits, const uint16_t* mask, T* image, T* ivar, std::size_t lo,
                     std::size_t hi, std::size_t* n_masked, std::size_t* n_nonfinite) {
  std::size_t masked = 0, nonfinite = 0;
  for (std::size_t g = lo; g < hi; g += kRulesGroup) {
    const std::size_t e = std::min(hi, g + kRulesGroup);
    if (e - g == kRulesGroup &&
        GroupKept(bad_bits, mask != nullptr ? mask + g : nullptr, image + g, ivar + g)) {
      continue;
    }
    for (std::size_t i = g; i < e; ++i) {
      double im = image[i], iv = ivar[i];
      const unsigned what =
          ApplyPixelRule(bad_bits, mask != nullptr ? mask[i] : uint16_t{0}, &im, &iv);
      image[i] = static_cast<T>(im);
      ivar[i] = static_cast<T>(iv);
      nonfinite += (what & kPixelNonfinite) != 0 ? 1 : 0;
      masked += (what & kPixelMasked) != 0 ? 1 : 0;
    }
  }
  *n_masked += masked;
  *n_nonfinite += nonfinite;
}

// The rules on chunk `c` of planes of `n` pixels (pixels [c * kDecodeChunkPixels, ...)).
template <typename T>
void ApplyRulesChunk(uint16_t bad_bits, const uint16_t* mask, T* image, T* ivar, std::size_t n,
                     int c, std::size_t* n_masked, std::size_t* n_nonfinite) {
  const std::size_t lo = static_cast<std::size_t>(c) * kDecodeChunkPixels;
  const std::size_t hi = std::min(n, lo + static_cast<std::size_t>(kDecodeChunkPixels));
  ApplyRulesRange<T>(bad_bits, mask, image, ivar, lo, hi, n_masked, n_nonfinite);
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_INTERNAL_PLANE_RULES_H_
