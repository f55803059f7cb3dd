#include "core/io/internal/preproc_checks.h"

#include <fitsio.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"

namespace spexd::core::preproc_checks {
namespace {

// Bytes a decoded pixel takes: IMAGE and IVAR as float64, MASK as 16 bits.
constexpr int64_t kDecodedBytesPerPixel = 8 + 8 + 2;

// Axes (NAXIS1 first) as ShapeText prints them.
std::string AxesText(const std::vector<int64_t>& axes) {
  FitsFile::ImageInfo info;
  for (int64_t a : axes) info.naxes.push_back(static_cast<long>(a));
  return ShapeText(info);
}

}  // namespace

std::string ShapeText(const FitsFile::ImageInfo& info) {
  std::string out;
  // FITS lists NAXIS1 (x, fastest) first; print row-major [NAXISn]...[NAXIS1] as the
  // spec writes shapes ([H][W]).
  for (auto it = info.naxes.rbegin(); it != info.naxes.rend(); ++it) {
    absl::StrAppend(&out, "[", *it, "]");
  }
  return out.empty() ? "[] (NAXIS = 0)" : out;
}

std::string PrimaryNotImage(const std::vector<int64_t>& axes) {
  return absl::StrCat("the primary HDU holds data ", AxesText(axes),
                      " but is not the IMAGE HDU: a preproc file's primary HDU is its IMAGE or "
                      "holds no data (the HDUs a preproc reader uses are IMAGE, IVAR, MASK, "
                      "FIBERMAP)");
}

// Moves to `extname`. false when the file has no such HDU; any other failure (e.g. a
// header cut off by truncation) is returned as an error.
absl::StatusOr<bool> MoveIfPresent(FitsFile& file, absl::string_view extname) {
  absl::Status status = file.MoveToHdu(extname);
  if (status.ok()) return true;
  if (absl::IsNotFound(status)) return false;
  return status;
}

absl::Status MissingHdu(const FitsFile& file, const std::string& extname) {
  return absl::InvalidArgumentError(
      absl::StrCat(file.name(), ": missing ", extname, " HDU (no HDU with EXTNAME '", extname,
                   "'; a DESI preproc file has IMAGE, IVAR, MASK, FIBERMAP)"));
}

// Validates the current HDU as a complete, non-empty 2-D image of at most `max_pixels`
// pixels (RESOURCE_EXHAUSTED past it: judged from the header, tile-compressed or not,
// before anything is decoded) and returns its description.
absl::StatusOr<FitsFile::ImageInfo> CheckPlane(FitsFile& file, int64_t max_pixels) {
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo info, file.GetImageInfo());
  if (info.naxes.size() != 2) {
    bool empty = info.naxes.empty();
    for (long a : info.naxes) empty = empty || a == 0;
    if (empty) return file.Invalid(absl::StrCat("empty image ", ShapeText(info)));
    return file.Invalid(absl::StrCat("image must be 2-D, is ", ShapeText(info)));
  }
  if (info.naxes[0] <= 0 || info.naxes[1] <= 0) {
    return file.Invalid(absl::StrCat("empty image ", ShapeText(info)));
  }
  if (info.naxes[0] > max_pixels / info.naxes[1]) {
    const double pixels = static_cast<double>(info.naxes[0]) * static_cast<double>(info.naxes[1]);
    return absl::ResourceExhaustedError(absl::StrCat(
        file.Invalid(absl::StrFormat("image %s has %.0f pixels, over the limit of %d",
                                     ShapeText(info), pixels, max_pixels))
            .message(),
        absl::StrFormat(" (decoding it would take %.0f MiB); refused before decoding",
                        pixels * kDecodedBytesPerPixel / (1 << 20))));
  }
  SPEXD_RETURN_IF_ERROR(file.CheckHduComplete());
  return info;
}

// IMAGE and IVAR are floating point in preproc files (spec §5.1). An integer plane
// means a wrong HDU or a raw (not preprocessed) image, so it is refused rather than
// converted.
absl::Status CheckFloatPlane(const FitsFile& file, const FitsFile::ImageInfo& info) {
  if (info.equiv_bitpix == FLOAT_IMG || info.equiv_bitpix == DOUBLE_IMG) {
    return absl::OkStatus();
  }
  return file.Invalid(absl::StrCat("wrong pixel type: BITPIX ", info.equiv_bitpix,
                                   " (expected float32 -32 or float64 -64)"));
}

absl::Status CheckSameShape(const FitsFile& file, const std::string& what,
                            const FitsFile::ImageInfo& info,
                            const FitsFile::ImageInfo& image_info) {
  if (info.naxes == image_info.naxes) return absl::OkStatus();
  return file.Invalid(absl::StrCat(what, " shape ", ShapeText(info),
                                   " does not match IMAGE shape ", ShapeText(image_info)));
}

// What a preproc reader needs of a .fits.gz's HDUs, judged from each header before its
// data inflate (HduHeaderCheck), so that a file costs what a preproc of its planes' shape
// needs, not what its HDUs declare: the primary HDU is IMAGE or holds no data (as DESI's
// preprocs and astropy's layouts have it; the primary cannot be dropped), IMAGE, IVAR and
// MASK (the first HDU of each name, as CFITSIO finds them) have one 2-D shape, and every
// other image extension (a READNOISE plane, a second IMAGE, any plane-sized HDU) is
// dropped: the reader moves to IMAGE, IVAR, MASK and FIBERMAP alone (tables are kept, and
// checked as in a plain file). CheckHeaders makes the same checks on a plain file, so that
// a .fits.gz is served exactly when its plain twin is.
HduHeaderCheck PreprocHduCheck() {
  struct Seen {
    std::vector<int64_t> shape[3];
    bool seen[4] = {false, false, false, false};
  };
  auto seen = std::make_shared<Seen>();
  return [seen](const HduHeaderFacts& hdu) -> absl::StatusOr<HduUse> {
    static constexpr const char* kUsed[] = {"IMAGE", "IVAR", "MASK", "FIBERMAP"};
    if (hdu.index == 0 && hdu.data_bytes > 0 && !hdu.Named("IMAGE")) {
      return absl::InvalidArgumentError(PrimaryNotImage(hdu.axes));
    }
    bool used = hdu.index == 0;
    for (int p = 0; p < 4; ++p) {
      if (seen->seen[p] || !hdu.Named(kUsed[p])) continue;
      seen->seen[p] = true;
      used = true;
      if (p == 3 || !hdu.image || hdu.axes.size() != 2) continue;  // CheckHeaders words these
      seen->shape[p] = hdu.axes;
      for (int q = 0; q < 3; ++q) {  // against IMAGE first
        if (q == p || seen->shape[q].empty()) continue;
        if (seen->shape[q] != hdu.axes) {
          return absl::InvalidArgumentError(absl::StrCat(
              kUsed[p], " shape ", AxesText(hdu.axes), " does not match ", kUsed[q], " shape ",
              AxesText(seen->shape[q])));
        }
        break;
      }
    }
    return used || hdu.table ? HduUse::kKeep : HduUse::kDrop;
  };
}

}  // namespace spexd::core::preproc_checks
