#include "core/frame/usable_data.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/str_cat.h"

namespace spexd::core {

absl::Status CheckImageHasValidPixel(const PreprocImage& image) {
  const bool any = image.has_float32_planes()
                       ? std::any_of(image.ivar32.begin(), image.ivar32.end(), [](float v) { return v > 0; })
                       : std::any_of(image.ivar.begin(), image.ivar.end(), [](double v) { return v > 0; });
  if (any) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      image.source_name.empty() ? std::string("image") : image.source_name,
      ": no valid pixel (every ivar is 0 after the mask and non-finite rules: ", image.n_masked,
      " masked, ", image.n_nonfinite, " non-finite)"));
}

int64_t CountUsableBins(const BundleResult& b) {
  int64_t usable = 0;
  const std::size_t n = b.ivar.size();
  for (std::size_t i = 0; i < n; ++i) {
    const bool failed = i < b.failed_bins.size() && b.failed_bins[i] != 0;
    const bool masked =
        i < b.pixmask_fraction.size() && !(b.pixmask_fraction[i] < kMaxUsablePixmaskFraction);
    usable += b.ivar[i] > 0 && !failed && !masked;
  }
  return usable;
}

absl::Status CheckUsableResult(int64_t usable_bins, const PatchCounts& c) {
  if (usable_bins > 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "extraction produced no usable bin: ", c.extracted, " patches extracted, ", c.failed,
      " failed, ", c.skipped, " off the CCD; every extracted bin saw only pixels of ivar 0 "
      "or a failed solve (wrong PSF or image, or a dead region?)"));
}

}  // namespace spexd::core
