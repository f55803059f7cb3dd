#include "core/frame/usable_data.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/numerics/pixel_rules.h"

namespace spexd::core {

namespace {

float FromBigEndian(uint32_t word) {
  const uint32_t bits = __builtin_bswap32(word);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Raw planes (the rules not applied yet): the rules on each pixel's values until one keeps
// ivar > 0; when none does, `masked` and `nonfinite` count what the rules did to all.
bool RawHasValidPixel(const PreprocImage& image, std::size_t* masked, std::size_t* nonfinite) {
  const std::size_t n = std::min(image.image_raw.size(), image.ivar_raw.size());
  const bool has_mask = image.mask_raw.size() == n;
  for (std::size_t i = 0; i < n; ++i) {
    double im = FromBigEndian(image.image_raw[i]), iv = FromBigEndian(image.ivar_raw[i]);
    const unsigned what =
        ApplyPixelRule(image.raw_bad_bits, has_mask ? image.mask_raw[i] : uint16_t{0}, &im, &iv);
    if (iv > 0) return true;
    *masked += (what & kPixelMasked) != 0 ? 1 : 0;
    *nonfinite += (what & kPixelNonfinite) != 0 ? 1 : 0;
  }
  return false;
}

}  // namespace

absl::Status CheckImageHasValidPixel(const PreprocImage& image) {
  std::size_t masked = image.n_masked, nonfinite = image.n_nonfinite;
  const bool any =
      image.has_raw_planes() ? RawHasValidPixel(image, &masked, &nonfinite)
      : image.has_float32_planes()
          ? std::any_of(image.ivar32.begin(), image.ivar32.end(), [](float v) { return v > 0; })
          : std::any_of(image.ivar.begin(), image.ivar.end(), [](double v) { return v > 0; });
  if (any) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      image.source_name.empty() ? std::string("image") : image.source_name,
      ": no valid pixel (every ivar is 0 after the mask and non-finite rules: ", masked,
      " masked, ", nonfinite, " non-finite)"));
}

int64_t CountUsableBins(const BundleResult& b) {
  // A bin past the end of failed_bins or pixmask_fraction (empty in some results) is not
  // failed or masked there: the bins in three runs, so that each loop has no bounds test
  // and vectorises (a frame's 1.2 million bins, on every served frame).
  const std::size_t n = b.ivar.size();
  const std::size_t nf = std::min(n, b.failed_bins.size());
  const std::size_t np = std::min(n, b.pixmask_fraction.size());
  const double* ivar = b.ivar.data();
  const uint8_t* failed = b.failed_bins.data();
  const double* pf = b.pixmask_fraction.data();
  auto count = [&](std::size_t lo, std::size_t hi, bool with_failed, bool with_pf) {
    int64_t usable = 0;
    for (std::size_t i = lo; i < hi; ++i) {
      const bool bad = (with_failed && failed[i] != 0) ||
                       (with_pf && !(pf[i] < kMaxUsablePixmaskFraction));
      usable += ivar[i] > 0 && !bad ? 1 : 0;
    }
    return usable;
  };
  const std::size_t both = std::min(nf, np), either = std::max(nf, np);
  return count(0, both, true, true) + count(both, either, nf > both, np > both) +
         count(either, n, false, false);
}

absl::Status CheckUsableResult(int64_t usable_bins, const PatchCounts& c) {
  if (usable_bins > 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "extraction produced no usable bin: ", c.extracted, " patches extracted, ", c.failed,
      " failed, ", c.skipped, " off the CCD; every extracted bin saw only pixels of ivar 0 "
      "or a failed solve (wrong PSF or image, or a dead region?)"));
}

}  // namespace spexd::core
