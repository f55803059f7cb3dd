// Checks a decompressed FITS stream header by header as it inflates, with the card rules
// of the walk that every FITS file gets before CFITSIO opens it (fits_header.h): each
// header is judged against the limits, and against what the reader needs of its HDU
// (HduHeaderCheck), as soon as its END card is out and before any of its data is
// inflated; and finds where the FITS file ends. The part of core/io/fits_gunzip.cc that
// knows FITS, apart from the part that inflates.
#ifndef SPEXD_CORE_IO_INTERNAL_FITS_STREAM_CHECK_H_
#define SPEXD_CORE_IO_INTERNAL_FITS_STREAM_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/fits_header.h"

namespace spexd::core {

inline constexpr std::size_t kFitsBlock = 2880;  // FITS logical record (FITS 4.0 §3.1)

class FitsStreamCheck {
 public:
  // `hdu_check` may be empty.
  FitsStreamCheck(const std::string& name, const FitsSizeLimits& limits,
                  const HduHeaderCheck& hdu_check)
      : name_(name), limits_(limits), hdu_check_(hdu_check) {}

  // In place, as the output grows: `so_far` is everything inflated so far (the previous
  // call's bytes and more, at the same address or copied). Parses the header records it
  // completes, so that each header is judged before any of its data is inflated, and skips
  // data. Once trailing(), the FITS file ends at parsed() and later bytes are not read.
  absl::Status Advance(absl::string_view so_far);
  bool trailing() const { return mode_ == Mode::kTrailing; }
  // An HDU the check dropped (HduUse::kDrop): its header lies at [drop_from(),
  // drop_data()) of the output, then its data, drop_bytes() with padding (at least
  // drop_min_bytes()). The caller removes those bytes from the output and calls
  // Dropped(); Advance parses nothing until then.
  bool drop_pending() const { return drop_pending_; }
  std::size_t drop_from() const { return drop_from_; }
  std::size_t drop_data() const { return drop_data_; }
  int64_t drop_bytes() const { return drop_bytes_; }
  int64_t drop_min_bytes() const { return drop_min_bytes_; }
  void Dropped() {
    drop_pending_ = false;
    dropped_ += static_cast<int64_t>(drop_data_ - drop_from_) + drop_bytes_;
  }
  // Whether the primary header has ended and passed its checks.
  bool primary_passed() const { return hdu_ > 0; }
  std::size_t parsed() const { return pos_; }
  // After the last Advance over `inflated` bytes: the length of the FITS file.
  absl::StatusOr<std::size_t> FinishInPlace(std::size_t inflated);

 private:
  enum class Mode { kHeader, kData, kTrailing };
  absl::Status ParseRecord(absl::string_view record, std::size_t at);
  absl::Status NotFits(absl::string_view first_key) const;
  absl::Status EndOfHeader();
  absl::Status Invalid(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, "[HDU ", hdu_, "]: ", what));
  }

  const std::string& name_;
  const FitsSizeLimits& limits_;
  const HduHeaderCheck& hdu_check_;
  std::size_t pos_ = 0;  // bytes parsed
  Mode mode_ = Mode::kHeader;
  int hdu_ = 0;
  bool in_header_ = false;        // a header has begun and not ended
  std::size_t data_end_ = 0;      // where the current HDU's (padded) data ends
  std::size_t data_min_end_ = 0;  // the same without the padding of its last record
  internal::FitsHeader header_;
  bool drop_pending_ = false;
  std::size_t drop_from_ = 0, drop_data_ = 0;
  int64_t drop_bytes_ = 0, drop_min_bytes_ = 0;
  int64_t dropped_ = 0;  // bytes of the stream dropped so far (headers and data)
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_INTERNAL_FITS_STREAM_CHECK_H_
