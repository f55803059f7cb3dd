// Checks a decompressed FITS stream against the size limits header by header (gzip
// bombs are refused from their headers, before their data is inflated), and finds
// where the FITS file ends: the part of core/io/fits_gunzip.cc that knows FITS, apart from
// the part that inflates.
#ifndef SPEXD_CORE_IO_INTERNAL_FITS_STREAM_CHECK_H_
#define SPEXD_CORE_IO_INTERNAL_FITS_STREAM_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/io/fits_gunzip.h"

namespace spexd::core {

inline constexpr std::size_t kFitsBlock = 2880;  // FITS logical record (FITS 4.0 §3.1)

// The cards of one HDU header that fix the size of its data (FITS 4.0 §4.4.1) and, for
// tile-compressed images, the size of the image (ZNAXISn).
struct HduShape {
  bool has_bitpix = false, has_naxis = false;
  int64_t bitpix = 0, naxis = 0, pcount = 0, gcount = 1, znaxis = 0;
  bool zimage = false, groups = false;
  std::string xtension;  // "" for the primary HDU
  std::vector<int64_t> naxes, znaxes;  // -1: card not seen
};

// Parses the decompressed FITS stream as it arrives (Add), or once it has all been
// inflated (CheckWhole): keeps the bytes of the HDUs (the FITS file CFITSIO will open),
// checks each header against the limits when its END card arrives, and drops what
// follows the last HDU.
class FitsStreamCheck {
 public:
  FitsStreamCheck(const std::string& name, const FitsSizeLimits& limits, const StopFn& stop)
      : name_(name), limits_(limits), stop_(stop) {}

  absl::Status Add(absl::string_view piece);
  absl::StatusOr<std::string> Finish();
  // Instead of Add and Finish: the whole inflated output at once, in place; returns the
  // length of the FITS file at its start.
  absl::StatusOr<std::size_t> CheckWhole(absl::string_view all);
  // In place, as the output grows: `so_far` is everything inflated so far (the previous
  // call's bytes and more, at the same address or copied). Parses the header blocks it
  // completes, so that each header is judged before any of its data is inflated, and skips
  // data. Once trailing(), the FITS file ends at parsed() and later bytes are not read.
  absl::Status Advance(absl::string_view so_far);
  bool trailing() const { return mode_ == Mode::kTrailing; }
  std::size_t parsed() const { return pos_; }
  // After the last Advance over `inflated` bytes: the length of the FITS file.
  absl::StatusOr<std::size_t> FinishInPlace(std::size_t inflated);
  // Reserves the output for a stream stated to inflate to `hint` bytes (within the limit).
  void Reserve(int64_t hint);

 private:
  static constexpr int64_t kStopPollBytes = int64_t{8} << 20;
  enum class Mode { kHeader, kData, kTrailing };
  absl::Status ParseBlock(absl::string_view block);
  absl::Status ParseCard(absl::string_view card, bool* end);
  absl::Status NotFits(absl::string_view first_key) const {
    // Escaped: the bytes of a file that is not FITS (binary, compressed) would reach a
    // client's status message raw, and gRPC clients read it as UTF-8.
    return Invalid(absl::StrCat("not a FITS file: the header starts with '", absl::CHexEscape(first_key),
                                "', not ", hdu_ == 0 ? "SIMPLE" : "XTENSION"));
  }
  absl::Status EndOfHeader();
  // What Finish keeps of `size` parsed bytes, or the error for an incomplete file.
  absl::StatusOr<std::size_t> FinalSize(std::size_t size) const;
  absl::Status Invalid(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, "[HDU ", hdu_, "]: ", what));
  }

  const std::string& name_;
  const FitsSizeLimits& limits_;
  const StopFn& stop_;
  std::string out_;
  std::size_t pos_ = 0;  // bytes of out_ parsed (Add: all of them)
  bool whole_ = false;   // CheckWhole: headers are checked after the inflation
  int64_t inflated_ = 0, next_poll_ = kStopPollBytes;
  Mode mode_ = Mode::kHeader;
  int hdu_ = 0;
  std::size_t card_index_ = 0;  // within the current header
  std::size_t data_end_ = 0;    // where the current HDU's (padded) data ends in out_
  std::size_t data_min_end_ = 0;  // the same without the padding of its last block
  HduShape shape_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_INTERNAL_FITS_STREAM_CHECK_H_
