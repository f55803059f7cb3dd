#include "core/io/internal/fits_stream_check.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

constexpr std::size_t kBlock = kFitsBlock;

}  // namespace

absl::StatusOr<std::size_t> FitsStreamCheck::FinishInPlace(std::size_t inflated) {
  std::size_t size = pos_;
  if (mode_ == Mode::kHeader && pos_ < inflated) size = inflated;  // a partial record at the end
  // As CFITSIO reads plain files: the last HDU's data may lack the padding of its last
  // record, and a partial record after the last HDU is ignored.
  bool complete = mode_ == Mode::kTrailing;
  if (mode_ == Mode::kHeader && !in_header_ && hdu_ > 0) {
    size -= size % kBlock;
    complete = true;
  }
  if (mode_ == Mode::kData && size >= data_min_end_) complete = true;
  if (!complete) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": truncated FITS file inside the gzip data (", size, " bytes)"));
  }
  return size;
}

absl::Status FitsStreamCheck::Advance(absl::string_view all) {
  // Header records are parsed, data skipped.
  while (!drop_pending_ && mode_ != Mode::kTrailing && pos_ < all.size()) {
    if (mode_ == Mode::kData) {
      pos_ = std::min(all.size(), data_end_);
      if (pos_ == data_end_) mode_ = Mode::kHeader;
      continue;
    }
    if (all.size() - pos_ < kBlock) break;  // the rest of this record is still to come
    const absl::string_view record = all.substr(pos_, kBlock);
    if (hdu_ > 0 && !in_header_ && !absl::StartsWith(record, "XTENSION")) {
      // Not an extension: the FITS file ended with the previous HDU (FITS 4.0 §3.5
      // allows special records there; CFITSIO ignores them).
      mode_ = Mode::kTrailing;
      break;
    }
    const std::size_t at = pos_;
    pos_ += kBlock;
    SPEXD_RETURN_IF_ERROR(ParseRecord(record, at));
  }
  return absl::OkStatus();
}

absl::Status FitsStreamCheck::NotFits(absl::string_view first_key) const {
  // Escaped: the bytes of a file that is not FITS (binary, compressed) would reach a
  // client's status message raw, and gRPC clients read it as UTF-8.
  return Invalid(absl::StrCat("not a FITS file: the header starts with '",
                              absl::CHexEscape(first_key), "', not SIMPLE"));
}

absl::Status FitsStreamCheck::ParseRecord(absl::string_view record, std::size_t at) {
  if (!in_header_) {
    // As the walk before CFITSIO (fits_layout.cc): a file starts with a SIMPLE card.
    if (hdu_ == 0 && !absl::StartsWith(record, "SIMPLE  ")) {
      return NotFits(absl::StripTrailingAsciiWhitespace(record.substr(0, 8)));
    }
    header_ = internal::FitsHeader(static_cast<std::int64_t>(at));
    in_header_ = true;
  }
  absl::StatusOr<bool> end = header_.AddRecord(record, static_cast<std::int64_t>(at));
  if (!end.ok()) return Invalid(end.status().message());
  if (!*end) return absl::OkStatus();
  in_header_ = false;
  return EndOfHeader();
}

absl::Status FitsStreamCheck::EndOfHeader() {
  const internal::FitsHeader& h = header_;
  const int64_t cap = limits_.max_file_bytes;
  // Against the stream's bytes, the dropped HDUs' included.
  const int64_t room = std::max<int64_t>(0, cap - static_cast<int64_t>(pos_) - dropped_);
  absl::StatusOr<internal::HduSize> size = internal::HduDataSize(h, hdu_ == 0, room);
  if (!size.ok()) return Invalid(size.status().message());
  // The image this HDU holds: its own axes, or for a tile-compressed image (a BINTABLE
  // with ZIMAGE = T) the ZNAXISn of the image it decompresses to; CFITSIO reads any HDU
  // that is not a table as an image.
  int64_t znaxis = 0;
  if (size->xtension == "BINTABLE" && h.Logical("ZIMAGE") && h.Find("ZNAXIS") != nullptr) {
    absl::StatusOr<int64_t> z = h.Int("ZNAXIS", 0, 999);
    if (!z.ok()) return Invalid(z.status().message());
    znaxis = *z;
  }
  const bool compressed = znaxis > 0;
  HduHeaderFacts facts;
  facts.index = hdu_;
  facts.image = compressed || !size->table;
  facts.extname = h.String("EXTNAME");
  facts.hduname = h.String("HDUNAME");
  facts.data_bytes = size->bytes;
  facts.table = size->table;
  if (facts.image) {
    const std::string key = compressed ? "ZNAXIS" : "NAXIS";
    const int64_t n = compressed ? znaxis : size->naxis;
    absl::StatusOr<int64_t> pixels = internal::AxesProduct(h, key, n, limits_.max_image_pixels);
    if (!pixels.ok()) return Invalid(pixels.status().message());
    if (*pixels > limits_.max_image_pixels) {
      return absl::ResourceExhaustedError(absl::StrCat(
          name_, "[HDU ", hdu_, "]: image of more than ", limits_.max_image_pixels,
          " pixels (the limit), refused from its header before decompressing its data"));
    }
    for (int64_t i = 1; i <= n; ++i) {
      absl::StatusOr<int64_t> a = h.Int(absl::StrCat(key, i), 0, limits_.max_image_pixels);
      facts.axes.push_back(a.ok() ? *a : 0);
    }
  }
  if (size->bytes > room) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, "[HDU ", hdu_, "]: the file's HDUs declare more than ", cap,
        " bytes, the limit for a decompressed FITS file; refused from the header"));
  }
  HduUse use = HduUse::kKeep;
  if (hdu_check_) {
    absl::StatusOr<HduUse> judged = hdu_check_(facts);
    if (!judged.ok()) {
      const std::string label =
          facts.extname.empty() ? absl::StrCat("HDU ", hdu_) : facts.extname;
      return absl::Status(judged.status().code(),
                          absl::StrCat(name_, "[", label, "]: ", judged.status().message(),
                                       " (refused from its header, before its data are "
                                       "decompressed)"));
    }
    use = *judged;
  }
  const int64_t padded = (size->bytes + static_cast<int64_t>(kBlock) - 1) /
                         static_cast<int64_t>(kBlock) * static_cast<int64_t>(kBlock);
  if (use == HduUse::kDrop && hdu_ > 0) {
    drop_pending_ = true;
    drop_from_ = static_cast<std::size_t>(h.start());
    drop_data_ = pos_;
    drop_bytes_ = padded;
    drop_min_bytes_ = size->bytes;
    pos_ = drop_from_;  // parsing goes on there once the caller has removed the HDU
    mode_ = Mode::kHeader;
    ++hdu_;
    return absl::OkStatus();
  }
  data_end_ = pos_ + static_cast<std::size_t>(padded);
  data_min_end_ = pos_ + static_cast<std::size_t>(size->bytes);
  mode_ = data_end_ > pos_ ? Mode::kData : Mode::kHeader;
  ++hdu_;
  return absl::OkStatus();
}

}  // namespace spexd::core
