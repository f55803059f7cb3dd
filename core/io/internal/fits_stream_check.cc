#include "core/io/internal/fits_stream_check.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/prefault.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

constexpr std::size_t kBlock = kFitsBlock;
constexpr std::size_t kCard = 80;

// a * b, saturated at `cap` + 1 (all operands are non-negative).
int64_t MulCapped(int64_t a, int64_t b, int64_t cap) {
  if (a == 0 || b == 0) return 0;
  if (a > (cap + 1) / b + 1) return cap + 1;
  return std::min(a * b, cap + 1);
}

}  // namespace

void FitsStreamCheck::Reserve(int64_t hint) {
  if (hint > 0 && hint <= limits_.max_file_bytes) {
    out_.reserve(static_cast<std::size_t>(hint));
    // A decompressed r frame is ~136 MB written once: in 4 KiB pages that is ~33,000
    // page faults, a good part of the inflation time.
    AdviseHugePages(out_.data(), out_.capacity());
  }
}

absl::Status FitsStreamCheck::Add(absl::string_view piece) {
  inflated_ += static_cast<int64_t>(piece.size());
  if (inflated_ > limits_.max_file_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, ": inflates to more than ", limits_.max_file_bytes,
        " bytes, the limit for a decompressed FITS file"));
  }
  if (stop_ && inflated_ >= next_poll_) {
    next_poll_ = inflated_ + kStopPollBytes;
    if (stop_()) return absl::CancelledError(absl::StrCat(name_, ": decompression stopped"));
  }
  while (!piece.empty() && mode_ != Mode::kTrailing) {
    if (mode_ == Mode::kData) {
      const std::size_t take = std::min(piece.size(), data_end_ - out_.size());
      out_.append(piece.data(), take);
      pos_ = out_.size();
      piece.remove_prefix(take);
      if (out_.size() == data_end_) mode_ = Mode::kHeader;
      continue;
    }
    // Header: whole blocks are parsed as they complete.
    const std::size_t in_block = out_.size() % kBlock;
    const std::size_t take = std::min(piece.size(), kBlock - in_block);
    out_.append(piece.data(), take);
    pos_ = out_.size();
    piece.remove_prefix(take);
    if (out_.size() % kBlock == 0) {
      const absl::string_view block(out_.data() + out_.size() - kBlock, kBlock);
      if (hdu_ > 0 && card_index_ == 0 && !absl::StartsWith(block, "XTENSION")) {
        // Not an extension: the FITS file ended with the previous HDU (FITS 4.0 §3.5
        // allows special records there; CFITSIO ignores them).
        out_.resize(out_.size() - kBlock);
        pos_ = out_.size();
        mode_ = Mode::kTrailing;
        break;
      }
      SPEXD_RETURN_IF_ERROR(ParseBlock(block));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::size_t> FitsStreamCheck::CheckWhole(absl::string_view all) {
  whole_ = true;
  inflated_ = static_cast<int64_t>(all.size());
  if (inflated_ > limits_.max_file_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, ": inflates to more than ", limits_.max_file_bytes,
        " bytes, the limit for a decompressed FITS file"));
  }
  SPEXD_RETURN_IF_ERROR(Advance(all));
  return FinishInPlace(all.size());
}

absl::StatusOr<std::size_t> FitsStreamCheck::FinishInPlace(std::size_t inflated) {
  if (mode_ == Mode::kHeader && pos_ < inflated) pos_ = inflated;  // a partial block at the end (FinalSize judges it)
  return FinalSize(pos_);
}

absl::Status FitsStreamCheck::Advance(absl::string_view all) {
  // The walk Add makes, without copying: header blocks are parsed, data skipped.
  while (mode_ != Mode::kTrailing && pos_ < all.size()) {
    if (mode_ == Mode::kData) {
      pos_ = std::min(all.size(), data_end_);
      if (pos_ == data_end_) mode_ = Mode::kHeader;
      continue;
    }
    if (all.size() - pos_ < kBlock) break;  // the rest of this block is still to come
    const absl::string_view block = all.substr(pos_, kBlock);
    if (hdu_ > 0 && card_index_ == 0 && !absl::StartsWith(block, "XTENSION")) {
      mode_ = Mode::kTrailing;  // as in Add
      break;
    }
    pos_ += kBlock;
    SPEXD_RETURN_IF_ERROR(ParseBlock(block));
  }
  return absl::OkStatus();
}

absl::Status FitsStreamCheck::ParseBlock(absl::string_view block) {
  // The cards after END in its block are padding.
  for (std::size_t off = 0; off < kBlock; off += kCard) {
    bool end = false;
    SPEXD_RETURN_IF_ERROR(ParseCard(block.substr(off, kCard), &end));
    if (end) break;
  }
  return absl::OkStatus();
}

absl::Status FitsStreamCheck::ParseCard(absl::string_view card, bool* end) {
  const std::string key(absl::StripTrailingAsciiWhitespace(card.substr(0, 8)));
  const std::size_t index = card_index_++;
  if (key == "END") {
    *end = true;
    return EndOfHeader();
  }
  if (card.substr(8, 2) != "= ") {  // commentary card
    if (index == 0) return NotFits(key);
    return absl::OkStatus();
  }
  absl::string_view value = card.substr(10);
  if (const std::size_t slash = value.find('/'); slash != absl::string_view::npos) {
    value = value.substr(0, slash);
  }
  value = absl::StripAsciiWhitespace(value);
  if (index == 0) {
    if (key != (hdu_ == 0 ? "SIMPLE" : "XTENSION")) return NotFits(key);
    if (hdu_ > 0) {
      shape_.xtension = std::string(absl::StripAsciiWhitespace(
          absl::StripPrefix(absl::StripSuffix(value, "'"), "'")));
    }
    return absl::OkStatus();
  }
  if (key == "ZIMAGE") {
    shape_.zimage = value == "T";
    return absl::OkStatus();
  }
  if (key == "GROUPS") {
    shape_.groups = value == "T";
    return absl::OkStatus();
  }
  const bool naxis_n = absl::StartsWith(key, "NAXIS") && key.size() > 5;
  const bool znaxis_n = absl::StartsWith(key, "ZNAXIS") && key.size() > 6;
  if (!naxis_n && !znaxis_n && key != "BITPIX" && key != "NAXIS" && key != "PCOUNT" &&
      key != "GCOUNT" && key != "ZNAXIS") {
    return absl::OkStatus();
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return Invalid(absl::StrCat("keyword ", key, " is not an integer"));
  }
  if (key == "BITPIX") {
    if (v != 8 && v != 16 && v != 32 && v != 64 && v != -32 && v != -64) {
      return Invalid(absl::StrCat("BITPIX = ", v, " is not a FITS pixel type"));
    }
    shape_.bitpix = v;
    shape_.has_bitpix = true;
    return absl::OkStatus();
  }
  if (v < 0) return Invalid(absl::StrCat("keyword ", key, " is negative"));
  auto set_axis = [&](std::vector<int64_t>& axes, absl::string_view digits) -> absl::Status {
    int n = 0;
    if (!absl::SimpleAtoi(digits, &n) || n < 1 || n > 999) return absl::OkStatus();
    if (axes.size() < static_cast<std::size_t>(n)) axes.resize(static_cast<std::size_t>(n), -1);
    axes[static_cast<std::size_t>(n - 1)] = v;
    return absl::OkStatus();
  };
  if (key == "NAXIS") {
    if (v > 999) return Invalid("NAXIS is over 999");
    shape_.naxis = v;
    shape_.has_naxis = true;
  } else if (key == "ZNAXIS") {
    shape_.znaxis = std::min<int64_t>(v, 999);
  } else if (key == "PCOUNT") {
    shape_.pcount = v;
  } else if (key == "GCOUNT") {
    shape_.gcount = v;
  } else if (naxis_n) {
    return set_axis(shape_.naxes, absl::string_view(key).substr(5));
  } else {
    return set_axis(shape_.znaxes, absl::string_view(key).substr(6));
  }
  return absl::OkStatus();
}

absl::Status FitsStreamCheck::EndOfHeader() {
  const HduShape& s = shape_;
  if (!s.has_bitpix || !s.has_naxis) return Invalid("header lacks BITPIX or NAXIS");
  if (s.naxes.size() < static_cast<std::size_t>(s.naxis)) {
    return Invalid(absl::StrCat("header lacks NAXIS", s.naxes.size() + 1));
  }
  const int64_t cap = limits_.max_file_bytes;
  // Pixels of the image this HDU holds: its own axes, or for a tile-compressed image
  // (a BINTABLE with ZIMAGE = T) the ZNAXISn of the image it decompresses to.
  const bool compressed = s.xtension == "BINTABLE" && s.zimage && s.znaxis > 0;
  const bool image = compressed || hdu_ == 0 || s.xtension == "IMAGE";
  const std::vector<int64_t>& axes = compressed ? s.znaxes : s.naxes;
  const int64_t naxes = !image ? 0 : compressed ? s.znaxis : s.naxis;
  int64_t pixels = naxes > 0 ? 1 : 0, data = s.naxis > 0 ? 1 : 0;
  for (int64_t i = 0; i < naxes; ++i) {
    const int64_t a = i < static_cast<int64_t>(axes.size()) ? axes[static_cast<std::size_t>(i)] : -1;
    if (a < 0) return Invalid(absl::StrCat("header lacks ", compressed ? "ZNAXIS" : "NAXIS", i + 1));
    pixels = MulCapped(pixels, a, limits_.max_image_pixels);
  }
  if (pixels > limits_.max_image_pixels) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, "[HDU ", hdu_, "]: image of more than ", limits_.max_image_pixels,
        " pixels (the limit), refused from its header",
        whole_ ? "" : " before decompressing its data"));
  }
  // Data size (FITS 4.0 §4.4.1.1, §7.1.2 random groups): |BITPIX|/8 x GCOUNT x
  // (PCOUNT + NAXIS1 x ... x NAXISn), NAXIS1 skipped for random groups.
  for (int64_t i = (hdu_ == 0 && s.groups && s.naxis > 0 && s.naxes[0] == 0) ? 1 : 0;
       i < s.naxis; ++i) {
    data = MulCapped(data, s.naxes[static_cast<std::size_t>(i)], cap);
  }
  if (s.naxis > 0) {
    data = std::min(data + s.pcount, cap + 1);
    data = MulCapped(data, s.gcount, cap);
    data = MulCapped(data, std::abs(s.bitpix) / 8, cap);
  }
  const int64_t padded = (data + static_cast<int64_t>(kBlock) - 1) / static_cast<int64_t>(kBlock) *
                         static_cast<int64_t>(kBlock);
  const int64_t end = static_cast<int64_t>(pos_) + padded;
  if (end > cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, "[HDU ", hdu_, "]: the file's HDUs declare more than ", cap,
        " bytes, the limit for a decompressed FITS file; refused from the header"));
  }
  data_end_ = static_cast<std::size_t>(end);
  data_min_end_ = pos_ + static_cast<std::size_t>(data);
  mode_ = data_end_ > pos_ ? Mode::kData : Mode::kHeader;
  ++hdu_;
  card_index_ = 0;
  shape_ = HduShape{};
  return absl::OkStatus();
}

absl::StatusOr<std::size_t> FitsStreamCheck::FinalSize(std::size_t size) const {
  // As CFITSIO reads plain files: the last HDU's data may lack the padding of its last
  // block, and a partial block after the last HDU is ignored.
  bool complete = mode_ == Mode::kTrailing;
  if (mode_ == Mode::kHeader && card_index_ == 0 && hdu_ > 0) {
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

absl::StatusOr<std::string> FitsStreamCheck::Finish() {
  SPEXD_ASSIGN_OR_RETURN(const std::size_t size, FinalSize(out_.size()));
  out_.resize(size);
  return std::move(out_);
}

// Bytes for a FITS file of up to `bytes`, rounded up to whole FITS blocks (the memory file

}  // namespace spexd::core
