// The checks a preproc reader (preproc.cc) makes of a file's HDUs before it decodes them:
// which HDUs a .fits.gz keeps (from their headers, before their data inflate), and each
// plane's shape, size and pixel type (extraction-spec §5.1).
#ifndef SPEXD_CORE_IO_INTERNAL_PREPROC_CHECKS_H_
#define SPEXD_CORE_IO_INTERNAL_PREPROC_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"

namespace spexd::core::preproc_checks {

// An image's shape, row-major as the spec writes shapes ([H][W]).
std::string ShapeText(const FitsFile::ImageInfo& info);

// The refusal of a primary HDU that holds data of shape `axes` (NAXIS1 first) but is not IMAGE.
std::string PrimaryNotImage(const std::vector<int64_t>& axes);

// Moves to `extname`. false when the file has no such HDU; any other failure (e.g. a
// header cut off by truncation) is returned as an error.
absl::StatusOr<bool> MoveIfPresent(FitsFile& file, absl::string_view extname);

absl::Status MissingHdu(const FitsFile& file, const std::string& extname);

// Validates the current HDU as a complete, non-empty 2-D image of at most `max_pixels`
// pixels (RESOURCE_EXHAUSTED past it: judged from the header, tile-compressed or not,
// before anything is decoded) and returns its description.
absl::StatusOr<FitsFile::ImageInfo> CheckPlane(FitsFile& file, int64_t max_pixels);

// IMAGE and IVAR are floating point in preproc files (spec §5.1). An integer plane
// means a wrong HDU or a raw (not preprocessed) image, so it is refused rather than
// converted.
absl::Status CheckFloatPlane(const FitsFile& file, const FitsFile::ImageInfo& info);

absl::Status CheckSameShape(const FitsFile& file, const std::string& what,
                            const FitsFile::ImageInfo& info,
                            const FitsFile::ImageInfo& image_info);

// What a preproc reader needs of a .fits.gz's HDUs, judged from each header before its
// data inflate (HduHeaderCheck); CheckHeaders makes the same checks on a plain file, so
// that a .fits.gz is served exactly when its plain twin is.
HduHeaderCheck PreprocHduCheck();

}  // namespace spexd::core::preproc_checks

#endif  // SPEXD_CORE_IO_INTERNAL_PREPROC_CHECKS_H_
