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
#include "core/io/internal/fits_card_value.h"

namespace spexd::core {
namespace {

constexpr std::int64_t kRecord = 2880;  // FITS standard §3.1
constexpr std::size_t kCard = 80;
constexpr std::int64_t kMaxAxes = 999;    // §4.4.1.1
constexpr std::int64_t kMaxFields = 999;  // §7.2.1

// The keyword cards of one header, by name (the first card of a name wins, as in CFITSIO).
struct Header {
  std::int64_t start = 0;      // byte offset of the header
  std::int64_t data_start = 0;
  std::map<std::string, std::string> values;  // value field (columns 11-80) of "KEY = " cards
  std::map<std::string, std::string> last;    // the same, the last card of a name winning
  std::vector<std::string> repeated;          // names of "KEY = " cards seen again
};

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
      SPEXD_ASSIGN_OR_RETURN(Header h, ReadHeader(offset, hdu));
      SPEXD_ASSIGN_OR_RETURN(std::int64_t data_bytes, DataBytes(h, hdu));
      // As CheckHduComplete: the last HDU may lack its padding, not its data.
      if (data_bytes > size_ - h.data_start) {
        return Invalid(hdu, absl::StrCat("truncated file: the HDU's data end at byte ",
                                         h.data_start + data_bytes, " but the file has ", size_,
                                         " bytes"));
      }
      if (spans_ != nullptr) spans_->push_back({h.start, h.data_start, data_bytes});
      offset = h.data_start + (data_bytes + kRecord - 1) / kRecord * kRecord;
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

  // Whether the bytes at `offset` begin with an XTENSION card: anything else after the
  // last HDU is ignored by CFITSIO, and by this check. A cut record that begins so is a
  // header (CFITSIO reads it: FitsFile::OpenMemory pads it to a whole record), and must
  // be whole and well-formed (found by fuzzing: CFITSIO parsed such a record's garbage).
  bool StartsExtension(std::int64_t offset) {
    char key[9] = {0};
    if (offset + 8 > size_ || !read_(offset, 8, key)) return false;
    return std::memcmp(key, "XTENSION", 8) == 0;
  }

  absl::StatusOr<Header> ReadHeader(std::int64_t offset, int hdu) {
    Header h;
    h.start = offset;
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
      for (std::size_t i = 0; i < record.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(record[i]);
        if (c < 0x20 || c > 0x7e) {  // §4.1.2.1: headers are printable ASCII
          return Invalid(hdu, absl::StrCat("header byte ", at + static_cast<std::int64_t>(i),
                                           " is not printable ASCII (", static_cast<int>(c), ")"));
        }
      }
      for (std::size_t card = 0; card < record.size(); card += kCard) {
        absl::string_view text(record.data() + card, kCard);
        std::string key(absl::StripTrailingAsciiWhitespace(text.substr(0, 8)));
        SPEXD_RETURN_IF_ERROR(CheckCardAsCfitsioReadsIt(text, key, hdu,
                                                        at + static_cast<std::int64_t>(card)));
        if (key == "END") {
          h.data_start = at + kRecord;
          extname_ = StringValue(h, "EXTNAME");
          return h;
        }
        if (text.substr(8, 2) == "= ") {
          h.last[key] = std::string(text.substr(10));
          if (!h.values.emplace(key, std::string(text.substr(10))).second) h.repeated.push_back(key);
        }
      }
    }
  }

  // Whether CFITSIO would give a card another name or value than this walk does, for a
  // name that decides the file's layout or how CFITSIO reads its data. CFITSIO names a
  // card by its characters up to the first blank or '=' (ffgknm), the name of a HIERARCH
  // card by its text up to the '=', and takes a value after the first '=' when columns
  // 9-10 do not hold "= " (ffpsvc); this walk reads the standard's columns (§4.1.2). A
  // card where the two differ is malformed, and refused when CFITSIO's reading of it
  // could matter (found by fuzzing: with "ZIMAGE $= T" CFITSIO took a table for a
  // compressed image whose tiles this walk never checked, and allocated 4 GB for one).
  absl::Status CheckCardAsCfitsioReadsIt(absl::string_view text, const std::string& key, int hdu,
                                         std::int64_t at) const {
    const auto refuse = [&](absl::string_view name, absl::string_view why) {
      return Invalid(hdu, absl::StrCat("the card at byte ", at, " ('",
                                       absl::StripTrailingAsciiWhitespace(text.substr(0, 30)),
                                       "') is malformed: ", why, " (CFITSIO would read it as ",
                                       name, ")"));
    };
    const absl::string_view field = text.substr(0, 8);
    const std::size_t stop = field.find_first_of(" =");
    if (key == "HIERARCH") {
      const std::size_t eq = text.find('=');
      if (eq == absl::string_view::npos) return absl::OkStatus();
      const absl::string_view name = absl::StripAsciiWhitespace(text.substr(9, eq - 9));
      if (DecidesLayout(name)) return refuse(name, "a HIERARCH card gives a structural keyword");
      return absl::OkStatus();
    }
    if (stop != absl::string_view::npos &&
        field.substr(stop).find_first_not_of(' ') != absl::string_view::npos) {
      const absl::string_view name = field.substr(0, stop);
      if (DecidesLayout(name)) return refuse(name, "its name field holds more than a name");
      return absl::OkStatus();
    }
    if (text.substr(8, 2) != "= " && DecidesLayout(key) && key != "END" &&
        text.find('=') != absl::string_view::npos) {
      return refuse(key, "its value indicator is not in columns 9-10");
    }
    return absl::OkStatus();
  }

  // Keywords whose value sets where HDUs lie, how their data are laid out or compressed,
  // or how CFITSIO converts their pixels: the mandatory ones, the table and compression
  // families (T..., Z...), BSCALE, BZERO, BLANK, EXTNAME (which the readers move by), END.
  static bool DecidesLayout(absl::string_view name) {
    // Those are all standard names: a longer HIERARCH name, or one with blanks, is none.
    if (name.size() > 8 || name.find(' ') != absl::string_view::npos) return false;
    static constexpr absl::string_view kNames[] = {"SIMPLE", "XTENSION", "BITPIX", "EXTEND",
                                                   "GROUPS", "PCOUNT", "GCOUNT", "EXTNAME",
                                                   "BSCALE", "BZERO", "BLANK", "END"};
    for (absl::string_view n : kNames) {
      if (name == n) return true;
    }
    return absl::StartsWith(name, "NAXIS") || absl::StartsWith(name, "T") ||
           absl::StartsWith(name, "Z");
  }

  // An integer keyword in [lo, hi]: digits with an optional sign, then a comment or blanks.
  absl::StatusOr<std::int64_t> Int(const Header& h, int hdu, const std::string& key,
                                   std::int64_t lo, std::int64_t hi) const {
    auto it = h.values.find(key);
    if (it == h.values.end()) return Invalid(hdu, absl::StrCat("missing keyword ", key));
    return IntValue(hdu, key, it->second, lo, hi);
  }

  // The same for the last card of `key`, `absent` when there is none.
  absl::StatusOr<std::int64_t> LastInt(const Header& h, int hdu, const std::string& key,
                                       std::int64_t absent, std::int64_t lo,
                                       std::int64_t hi) const {
    auto it = h.last.find(key);
    if (it == h.last.end()) return absent;
    return IntValue(hdu, key, it->second, lo, hi);
  }

  // `value` (a card's value field) as an integer in [lo, hi].
  absl::StatusOr<std::int64_t> IntValue(int hdu, const std::string& key, const std::string& value,
                                        std::int64_t lo, std::int64_t hi) const {
    const std::optional<std::int64_t> n = internal::CardInteger(value);
    if (!n.has_value() || *n < lo || *n > hi) {
      return Invalid(hdu, absl::StrCat("keyword ", key, " must be an integer in [", lo, ", ", hi,
                                       "], got '", absl::StripAsciiWhitespace(value).substr(0, 30),
                                       "'"));
    }
    return *n;
  }

  // A string keyword's text without its quotes and trailing blanks ("" when absent).
  static std::string StringValue(const Header& h, const std::string& key) {
    auto it = h.values.find(key);
    return it == h.values.end() ? "" : internal::CardString(it->second);
  }

  static bool Logical(const Header& h, const std::string& key) {
    auto it = h.values.find(key);
    return it != h.values.end() && internal::CardIsTrue(it->second);
  }

  // Bytes of one value of BITPIX-like keyword `key`.
  absl::StatusOr<std::int64_t> ValueBytes(const Header& h, int hdu, const std::string& key) const {
    SPEXD_ASSIGN_OR_RETURN(std::int64_t bitpix, Int(h, hdu, key, -64, 64));
    if (bitpix != 8 && bitpix != 16 && bitpix != 32 && bitpix != 64 && bitpix != -32 &&
        bitpix != -64) {
      return Invalid(hdu, absl::StrCat("keyword ", key, " = ", bitpix,
                                       " is not one of 8, 16, 32, 64, -32, -64"));
    }
    return (bitpix < 0 ? -bitpix : bitpix) / 8;
  }

  // The product of `key`first..`key`N, refusing any that exceeds `limit` (`what` says
  // why); 0 when N is 0.
  absl::StatusOr<std::int64_t> AxesProduct(const Header& h, int hdu, const std::string& key,
                                           std::int64_t naxis, std::int64_t limit,
                                           absl::string_view what, std::int64_t first = 1) const {
    std::int64_t product = naxis > 0 ? 1 : 0;
    for (std::int64_t i = first; i <= naxis; ++i) {
      SPEXD_ASSIGN_OR_RETURN(std::int64_t len, Int(h, hdu, absl::StrCat(key, i), 0, limit));
      if (len != 0 && product > limit / len) {
        return Invalid(hdu, absl::StrCat(what, ": the ", key, "n product exceeds ", limit));
      }
      product *= len;
    }
    return product;
  }

  // Bytes of the HDU's data (§4.4.1.1: |BITPIX|/8 * GCOUNT * (PCOUNT + NAXIS1 * ... *
  // NAXISn)), each factor bounded by the file size, and the extension-specific keywords
  // that CFITSIO allocates from.
  absl::StatusOr<std::int64_t> DataBytes(const Header& h, int hdu) {
    const bool primary = h.start == 0;
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t value_bytes, ValueBytes(h, hdu, "BITPIX"));
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t naxis, Int(h, hdu, "NAXIS", 0, kMaxAxes));
    SPEXD_ASSIGN_OR_RETURN(std::int64_t values, AxesProduct(h, hdu, "NAXIS", naxis, size_,
                                                           "truncated file"));
    const std::string xtension = primary ? std::string() : StringValue(h, "XTENSION");
    // As CFITSIO's ffrhdu: TABLE is an ASCII table, BINTABLE, A3DTABLE and 3DTABLE binary
    // ones; anything else it reads as an image (ffpinit).
    const bool table = xtension == "TABLE" || xtension == "BINTABLE" || xtension == "A3DTABLE" ||
                       xtension == "3DTABLE";
    std::int64_t pcount = 0, gcount = 1;
    if (table) {
      SPEXD_ASSIGN_OR_RETURN(pcount, Int(h, hdu, "PCOUNT", 0, size_));
      SPEXD_ASSIGN_OR_RETURN(gcount, Int(h, hdu, "GCOUNT", 0, size_));
    } else {
      // CFITSIO sizes the primary array and every other extension (ffpinit) with PCOUNT and
      // GCOUNT wherever they stand, the last of each winning, 0 and 1 when absent, and
      // NAXIS1 = 0 with GROUPS = T as random groups. A walk that sized them otherwise
      // would end where CFITSIO goes on, and CFITSIO would read HDUs never checked (found
      // by fuzzing: a primary header that ran into an extension's cards, PCOUNT among
      // them, led CFITSIO to a compressed HDU past the input's end).
      SPEXD_ASSIGN_OR_RETURN(pcount, LastInt(h, hdu, "PCOUNT", 0, 0, size_));
      SPEXD_ASSIGN_OR_RETURN(gcount, LastInt(h, hdu, "GCOUNT", 1, 0, size_));
      if (naxis > 0 && values == 0 && Logical(h, "GROUPS")) {
        SPEXD_ASSIGN_OR_RETURN(const std::int64_t naxis1, Int(h, hdu, "NAXIS1", 0, size_));
        if (naxis1 == 0) {
          SPEXD_ASSIGN_OR_RETURN(values, AxesProduct(h, hdu, "NAXIS", naxis, size_,
                                                     "truncated file", /*first=*/2));
        }
      }
    }
    // Each factor is at most size_ (< 2^63 / 2^40 for any input here), so this cannot
    // overflow once the product of the first two is checked.
    const std::int64_t per_group = pcount + values;
    if (gcount != 0 && per_group > size_ / gcount) {
      return Invalid(hdu, absl::StrCat("truncated file: the HDU announces more data than the ",
                                       size_, " bytes of the file"));
    }
    const std::int64_t bytes = value_bytes * gcount * per_group;
    if (table) {
      SPEXD_RETURN_IF_ERROR(CheckTable(h, hdu, xtension == "TABLE", naxis));
    }
    return bytes;
  }

  absl::Status CheckTable(const Header& h, int hdu, bool ascii, std::int64_t naxis) {
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
    if (Logical(h, "ZIMAGE")) {
      internal::CheckedBinaryTable table;
      table.cards = &h.values;
      table.repeated = &h.repeated;
      table.data_start = h.data_start;
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
  absl::StatusOr<std::int64_t> ColumnBytes(const Header& h, int hdu, std::int64_t i,
                                           std::int64_t limit) const {
    const std::string key = absl::StrCat("TFORM", i);
    auto it = h.values.find(key);
    if (it == h.values.end()) return Invalid(hdu, absl::StrCat("missing keyword ", key));
    absl::string_view v = absl::StripLeadingAsciiWhitespace(it->second);
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
