#include "core/io/internal/fits_layout.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/internal/compressed_hdu_check.h"
#include "core/io/internal/fits_header.h"

namespace spexd::core {
namespace {

using internal::FitsHeader;
using internal::HduSize;

constexpr std::int64_t kRecord = internal::kFitsRecordBytes;
constexpr std::int64_t kMaxFields = 999;  // §7.2.1

class LayoutChecker {
 public:
  LayoutChecker(FitsByteReader read, std::int64_t size, absl::string_view name,
                std::vector<FitsHduSpan>* spans)
      : read_(read), size_(size), name_(name), spans_(spans) {}

  absl::Status Check() {
    char simple[8] = {0};
    if (size_ < kRecord || !read_(0, sizeof simple, simple) ||
        std::memcmp(simple, "SIMPLE  ", sizeof simple) != 0) {
      return Invalid(1, "cannot open as FITS: the file does not start with a SIMPLE card");
    }
    std::int64_t offset = 0;
    for (int hdu = 1;; ++hdu) {
      SPEXD_ASSIGN_OR_RETURN(FitsHeader h, ReadHeader(offset, hdu));
      SPEXD_ASSIGN_OR_RETURN(std::int64_t data_bytes, DataBytes(h, hdu));
      // As CheckHduComplete: the last HDU may lack its padding, not its data.
      if (data_bytes > size_ - h.data_start()) {
        return Invalid(hdu, absl::StrCat("truncated file: the HDU's data end at byte ",
                                         h.data_start() + data_bytes, " but the file has ", size_,
                                         " bytes"));
      }
      if (spans_ != nullptr) spans_->push_back({h.start(), h.data_start(), data_bytes});
      offset = h.data_start() + (data_bytes + kRecord - 1) / kRecord * kRecord;
      if (!StartsExtension(offset)) return absl::OkStatus();
    }
  }

 private:
  // Errors name the HDU as FitsFile does: by EXTNAME, else "HDU <0-based index>".
  absl::Status Invalid(int hdu, absl::string_view what) const {
    const std::string label =
        extname_.empty() ? absl::StrCat("HDU ", hdu - 1) : extname_;
    return absl::InvalidArgumentError(absl::StrCat(name_, "[", label, "]: ", what));
  }
  // `st` (a bare message from fits_header.h) naming the file and HDU.
  absl::Status Named(int hdu, const absl::Status& st) const {
    return st.ok() ? st : Invalid(hdu, st.message());
  }

  // Whether the bytes at `offset` begin with an XTENSION card: anything else after the
  // last HDU is ignored by CFITSIO, and by this check. A cut record that begins so is a
  // header (CFITSIO reads it: FitsFile::OpenMemory pads it to a whole record), and must
  // be whole and well-formed (found by fuzzing: CFITSIO parsed such a record's garbage).
  bool StartsExtension(std::int64_t offset) {
    char key[9] = {0};
    if (offset + 8 > size_ || !read_(offset, 8, key)) return false;
    return std::memcmp(key, "XTENSION", 8) == 0;
  }

  absl::StatusOr<FitsHeader> ReadHeader(std::int64_t offset, int hdu) {
    FitsHeader h(offset);
    extname_.clear();
    std::string record(static_cast<std::size_t>(kRecord), ' ');
    for (std::int64_t at = offset;; at += kRecord) {
      if (at + kRecord > size_) {
        return Invalid(hdu, absl::StrCat("truncated file: the header starting at byte ", offset,
                                         " has no END card in the file's ", size_, " bytes"));
      }
      if (!read_(at, record.size(), record.data())) {
        return Invalid(hdu, absl::StrCat("cannot read the header at byte ", at));
      }
      absl::StatusOr<bool> end = h.AddRecord(record, at);
      if (!end.ok()) return Named(hdu, end.status());
      if (*end) {
        extname_ = h.String("EXTNAME");
        return h;
      }
    }
  }

  // An integer keyword in [lo, hi]: digits with an optional sign, then a comment or blanks.
  absl::StatusOr<std::int64_t> Int(const FitsHeader& h, int hdu, const std::string& key,
                                   std::int64_t lo, std::int64_t hi) const {
    absl::StatusOr<std::int64_t> v = h.Int(key, lo, hi);
    if (!v.ok()) return Named(hdu, v.status());
    return v;
  }

  // Bytes of the HDU's data (fits_header.h HduDataSize), within the file, and the
  // extension-specific keywords that CFITSIO allocates from.
  absl::StatusOr<std::int64_t> DataBytes(const FitsHeader& h, int hdu) {
    absl::StatusOr<HduSize> size = HduDataSize(h, h.start() == 0, size_);
    if (!size.ok()) return Named(hdu, size.status());
    if (size->bytes > size_) {
      return Invalid(hdu, absl::StrCat("truncated file: the HDU announces more data than the ",
                                       size_, " bytes of the file"));
    }
    if (size->table) {
      SPEXD_RETURN_IF_ERROR(CheckTable(h, hdu, size->xtension == "TABLE", size->naxis));
    }
    return size->bytes;
  }

  absl::Status CheckTable(const FitsHeader& h, int hdu, bool ascii, std::int64_t naxis) {
    if (naxis != 2) return Invalid(hdu, "a table must have NAXIS = 2");
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t tfields, Int(h, hdu, "TFIELDS", 0, kMaxFields));
    if (ascii) return absl::OkStatus();
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t row_bytes, Int(h, hdu, "NAXIS1", 0, size_));
    // §7.3.1: the columns' widths add up to NAXIS1, which bounds every repeat count.
    std::int64_t width = 0;
    std::vector<std::int64_t> offsets;  // of each column within a row
    for (std::int64_t i = 1; i <= tfields; ++i) {
      offsets.push_back(width);
      SPEXD_ASSIGN_OR_RETURN(std::int64_t w, ColumnBytes(h, hdu, i, size_));
      width += w;
      if (width > row_bytes) break;
    }
    if (width != row_bytes) {
      return Invalid(hdu, absl::StrCat("the TFORMn widths add up to ",
                                       width > row_bytes ? "more than" : "", " ", width,
                                       " bytes, NAXIS1 says ", row_bytes));
    }
    if (h.Logical("ZIMAGE")) {
      internal::CheckedBinaryTable table;
      table.cards = &h.values();
      table.repeated = &h.repeated();
      table.data_start = h.data_start();
      table.row_bytes = row_bytes;
      SPEXD_ASSIGN_OR_RETURN(table.rows, Int(h, hdu, "NAXIS2", 0, size_));
      SPEXD_ASSIGN_OR_RETURN(table.heap_bytes, Int(h, hdu, "PCOUNT", 0, size_));
      table.column_offsets = std::move(offsets);
      internal::TileQuantization q = internal::TileQuantization::kNone;
      absl::Status st = internal::CheckCompressedImage(table, read_, &q);
      if (absl::IsInvalidArgument(st)) return Invalid(hdu, st.message());
      SPEXD_RETURN_IF_ERROR(st);
      (q == internal::TileQuantization::kSetsLossless ? sets_lossless_ : quantized_) |=
          q != internal::TileQuantization::kNone;
      if (sets_lossless_ && quantized_) {
        return Invalid(hdu, "quantized and lossless tile-compressed float images in one file: "
                            "CFITSIO 4.2 decodes a quantized one read after a lossless one as "
                            "lossless (wrong pixels); compress them alike");
      }
    }
    return absl::OkStatus();
  }

  // Bytes one row of binary-table column `i` takes (§7.3.1, Table 18): TFORMn is rT with an
  // optional repeat count r, or rPt(max) / rQt(max) for a variable-length array.
  absl::StatusOr<std::int64_t> ColumnBytes(const FitsHeader& h, int hdu, std::int64_t i,
                                           std::int64_t limit) const {
    const std::string key = absl::StrCat("TFORM", i);
    const std::string* value = h.Find(key);
    if (value == nullptr) return Invalid(hdu, absl::StrCat("missing keyword ", key));
    absl::string_view v = absl::StripLeadingAsciiWhitespace(*value);
    if (v.empty() || v[0] != '\'') return Invalid(hdu, absl::StrCat(key, " is not a string"));
    v.remove_prefix(1);
    v = absl::StripLeadingAsciiWhitespace(v);
    std::int64_t repeat = 0;
    std::size_t digits = 0;
    while (digits < v.size() && absl::ascii_isdigit(static_cast<unsigned char>(v[digits]))) {
      if (digits == 18) return Invalid(hdu, absl::StrCat(key, " has too large a repeat count"));
      repeat = repeat * 10 + (v[digits] - '0');
      ++digits;
    }
    if (digits == 0) repeat = 1;
    if (digits >= v.size()) return Invalid(hdu, absl::StrCat(key, " has no data type"));
    const char type = absl::ascii_toupper(static_cast<unsigned char>(v[digits]));
    std::int64_t bytes_per = 0;
    switch (type) {
      case 'L': case 'B': case 'A': bytes_per = 1; break;
      case 'I': bytes_per = 2; break;
      case 'J': case 'E': bytes_per = 4; break;
      case 'K': case 'D': case 'C': case 'P': bytes_per = 8; break;
      case 'M': case 'Q': bytes_per = 16; break;
      case 'X': return (repeat + 7) / 8;
      default:
        return Invalid(hdu, absl::StrCat(key, " has an unknown data type '", std::string(1, type),
                                         "'"));
    }
    if (repeat > limit / bytes_per) {
      return Invalid(hdu, absl::StrCat(key, " announces more than the file's ", limit, " bytes"));
    }
    return repeat * bytes_per;
  }

  FitsByteReader read_;
  // Tile-compressed HDUs seen so far (compressed_hdu_check.h: CFITSIO's quantization state).
  bool sets_lossless_ = false, quantized_ = false;
  std::string extname_;  // of the HDU being checked, once its header is read
  const std::int64_t size_;
  const absl::string_view name_;
  std::vector<FitsHduSpan>* const spans_;  // filled when set
};

}  // namespace

absl::Status CheckFitsLayout(FitsByteReader read, std::int64_t size, absl::string_view name) {
  return LayoutChecker(read, size, name, nullptr).Check();
}

absl::Status CheckFitsLayout(FitsByteReader read, std::int64_t size, absl::string_view name,
                             std::vector<FitsHduSpan>* spans) {
  return LayoutChecker(read, size, name, spans).Check();
}

absl::Status CheckFitsLayout(const void* data, std::size_t size, absl::string_view name) {
  const char* bytes = static_cast<const char*>(data);
  return CheckFitsLayout(
      [&](std::int64_t offset, std::size_t n, char* out) {
        if (offset < 0 || static_cast<std::size_t>(offset) + n > size) return false;
        std::memcpy(out, bytes + offset, n);
        return true;
      },
      static_cast<std::int64_t>(size), name);
}

}  // namespace spexd::core
