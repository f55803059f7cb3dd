// The per-pixel input rules (extraction-spec §2.1 and "Decisions": mask policy,
// non-finite pixels, negative ivar), written once for the host reader
// (core::ApplyPixelRules) and for frames read straight from device memory by the CUDA
// backend (cuda/kernels/image_import.cu), so that both give bit-identical planes.
#ifndef SPEXD_CORE_PIXEL_RULES_H_
#define SPEXD_CORE_PIXEL_RULES_H_

#include <cmath>
#include <cstdint>

#include "core/numerics/host_device.h"

namespace spexd::core {

// What ApplyPixelRule did to a pixel (bits; a pixel may be both).
inline constexpr unsigned kPixelNonfinite = 1u;
inline constexpr unsigned kPixelMasked = 2u;

SPEXD_HD bool IsFiniteValue(double x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

// Applies the rules to one pixel in place. `bad_bits`: the mask bits that make a pixel
// unmeasured (MaskBadBits); `mask` is that pixel's MASK value (0 without a mask).
SPEXD_HD unsigned ApplyPixelRule(uint16_t bad_bits, uint16_t mask, double* image, double* ivar) {
  unsigned what = 0;
  // Non-finite rule (spec "Decisions", fix over the reference): a NaN or Inf in either
  // plane would propagate through the dense GEMV and the chi2 stage, so the pixel
  // becomes unmeasured. Identical results for finite input.
  if (!IsFiniteValue(*image) || !IsFiniteValue(*ivar)) {
    *image = 0.0;
    *ivar = 0.0;
    what |= kPixelNonfinite;
  }
  if ((mask & bad_bits) != 0) {
    // The image is deliberately not zeroed here (spec §2.1: the reference keeps it).
    *ivar = 0.0;
    what |= kPixelMasked;
  } else if (*ivar < 0.0) {
    // Negative ivar is not handled by the reference (spec §2.1). It is not a valid
    // weight: it would make the patch's AᵀNA indefinite and fail the whole patch's
    // solve. Treating the pixel as unmeasured confines the damage to one pixel, and
    // counting it as masked keeps it visible in logs and metrics.
    *ivar = 0.0;
    what |= kPixelMasked;
  }
  return what;
}

// For a float32 pixel, from its bits: a word whose bit 31 is clear only when ApplyPixelRule
// leaves the pixel as it is, its mask aside (both values finite, ivar's sign bit clear; an
// ivar of -0, which the rule keeps, sets it too: the caller then applies the rule). ORed
// over many pixels, bit 31 is clear when the rule keeps all of them: integer operations
// without branches, for a loop the compiler vectorises.
SPEXD_HD uint32_t Float32RuleFlags(uint32_t image_bits, uint32_t ivar_bits) {
  constexpr uint32_t kExponent = 0x7f800000u, kCarry = 0x00800000u;
  // (bits & kExponent) + kCarry reaches bit 31 only for an all-ones exponent (Inf, NaN).
  return ((image_bits & kExponent) + kCarry) | ((ivar_bits & kExponent) + kCarry) | ivar_bits;
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_PIXEL_RULES_H_
