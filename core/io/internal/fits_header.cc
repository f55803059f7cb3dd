#include "core/io/internal/fits_header.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/internal/fits_card_value.h"

namespace spexd::core::internal {
namespace {

constexpr std::int64_t kMaxAxes = 999;  // §4.4.1.1
constexpr std::int64_t kAnyCount = std::numeric_limits<std::int64_t>::max();

// a * b for non-negative operands, saturated at cap + 1.
std::int64_t MulCapped(std::int64_t a, std::int64_t b, std::int64_t cap) {
  if (a == 0 || b == 0) return 0;
  if (a > (cap + 1) / b) return cap + 1;
  return std::min(a * b, cap + 1);
}

// Keywords whose value sets where HDUs lie, how their data are laid out or compressed,
// or how CFITSIO converts their pixels: the mandatory ones, the table and compression
// families (T..., Z...), BSCALE, BZERO, BLANK, EXTNAME (which the readers move by), END.
bool DecidesLayout(absl::string_view name) {
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

// Whether CFITSIO would give a card another name or value than these rules do, for a
// name that decides the file's layout or how CFITSIO reads its data. CFITSIO names a
// card by its characters up to the first blank or '=' (ffgknm), the name of a HIERARCH
// card by its text up to the '=', and takes a value after the first '=' when columns
// 9-10 do not hold "= " (ffpsvc); these rules read the standard's columns (§4.1.2). A
// card where the two differ is malformed, and refused when CFITSIO's reading of it
// could matter (found by fuzzing: with "ZIMAGE $= T" CFITSIO took a table for a
// compressed image whose tiles the walk never checked, and allocated 4 GB for one).
absl::Status CheckCardAsCfitsioReadsIt(absl::string_view text, const std::string& key,
                                       std::int64_t at) {
  const auto refuse = [&](absl::string_view name, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the card at byte ", at, " ('", absl::StripTrailingAsciiWhitespace(text.substr(0, 30)),
        "') is malformed: ", why, " (CFITSIO would read it as ", name, ")"));
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

}  // namespace

absl::StatusOr<bool> FitsHeader::AddRecord(absl::string_view record, std::int64_t at) {
  if (++records_ > kMaxHeaderRecords) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the header has no END card in its first ", kMaxHeaderCards, " cards (",
        kMaxHeaderRecords * kFitsRecordBytes,
        " bytes), the most a header may hold (DESI's largest hold a few hundred)"));
  }
  for (std::size_t i = 0; i < record.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(record[i]);
    if (c < 0x20 || c > 0x7e) {  // §4.1.2.1: headers are printable ASCII
      return absl::InvalidArgumentError(absl::StrCat("header byte ", at + static_cast<std::int64_t>(i),
                                                     " is not printable ASCII (", static_cast<int>(c),
                                                     ")"));
    }
  }
  for (std::size_t card = 0; card + kFitsCardBytes <= record.size(); card += kFitsCardBytes) {
    const absl::string_view text = record.substr(card, kFitsCardBytes);
    const std::string key(absl::StripTrailingAsciiWhitespace(text.substr(0, 8)));
    SPEXD_RETURN_IF_ERROR(CheckCardAsCfitsioReadsIt(text, key, at + static_cast<std::int64_t>(card)));
    if (key == "END") {
      data_start_ = at + kFitsRecordBytes;
      return true;
    }
    if (text.substr(8, 2) == "= ") {
      std::string value(text.substr(10));
      last_[key] = value;
      if (!values_.emplace(key, std::move(value)).second) repeated_.push_back(key);
    }
  }
  return false;
}

const std::string* FitsHeader::Find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::int64_t> CardIntIn(const std::string& key, absl::string_view value,
                                       std::int64_t lo, std::int64_t hi) {
  const std::optional<std::int64_t> n = CardInteger(value);
  if (!n.has_value() || *n < lo || *n > hi) {
    const std::string range =
        hi == kAnyCount ? absl::StrCat("an integer of at least ", lo)
                        : absl::StrCat("an integer in [", lo, ", ", hi, "]");
    return absl::InvalidArgumentError(absl::StrCat("keyword ", key, " must be ", range, ", got '",
                                                   absl::StripAsciiWhitespace(value).substr(0, 30),
                                                   "'"));
  }
  return *n;
}

absl::StatusOr<std::int64_t> FitsHeader::Int(const std::string& key, std::int64_t lo,
                                             std::int64_t hi) const {
  const std::string* v = Find(key);
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing keyword ", key));
  return CardIntIn(key, *v, lo, hi);
}

absl::StatusOr<std::int64_t> FitsHeader::LastInt(const std::string& key, std::int64_t absent,
                                                 std::int64_t lo, std::int64_t hi) const {
  auto it = last_.find(key);
  if (it == last_.end()) return absent;
  return CardIntIn(key, it->second, lo, hi);
}

std::string FitsHeader::String(const std::string& key) const {
  const std::string* v = Find(key);
  return v == nullptr ? "" : CardString(*v);
}

bool FitsHeader::Logical(const std::string& key) const {
  const std::string* v = Find(key);
  return v != nullptr && CardIsTrue(*v);
}

absl::StatusOr<std::int64_t> AxesProduct(const FitsHeader& h, const std::string& key,
                                         std::int64_t n, std::int64_t limit, std::int64_t first) {
  std::int64_t product = n > 0 ? 1 : 0;
  for (std::int64_t i = first; i <= n; ++i) {
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t len, h.Int(absl::StrCat(key, i), 0, kAnyCount));
    product = MulCapped(product, len, limit);
  }
  return product;
}

absl::StatusOr<HduSize> HduDataSize(const FitsHeader& h, bool primary, std::int64_t limit) {
  HduSize s;
  SPEXD_ASSIGN_OR_RETURN(const std::int64_t bitpix, h.Int("BITPIX", -64, 64));
  if (bitpix != 8 && bitpix != 16 && bitpix != 32 && bitpix != 64 && bitpix != -32 &&
      bitpix != -64) {
    return absl::InvalidArgumentError(
        absl::StrCat("keyword BITPIX = ", bitpix, " is not one of 8, 16, 32, 64, -32, -64"));
  }
  SPEXD_ASSIGN_OR_RETURN(s.naxis, h.Int("NAXIS", 0, kMaxAxes));
  SPEXD_ASSIGN_OR_RETURN(std::int64_t values, AxesProduct(h, "NAXIS", s.naxis, limit));
  s.xtension = primary ? std::string() : h.String("XTENSION");
  // As CFITSIO's ffrhdu: TABLE is an ASCII table, BINTABLE, A3DTABLE and 3DTABLE binary
  // ones; anything else it reads as an image (ffpinit).
  s.table = s.xtension == "TABLE" || s.xtension == "BINTABLE" || s.xtension == "A3DTABLE" ||
            s.xtension == "3DTABLE";
  std::int64_t pcount = 0, gcount = 1;
  if (s.table) {
    SPEXD_ASSIGN_OR_RETURN(pcount, h.Int("PCOUNT", 0, kAnyCount));
    SPEXD_ASSIGN_OR_RETURN(gcount, h.Int("GCOUNT", 0, kAnyCount));
  } else {
    // CFITSIO sizes the primary array and every other extension (ffpinit) with PCOUNT and
    // GCOUNT wherever they stand, the last of each winning, 0 and 1 when absent, and
    // NAXIS1 = 0 with GROUPS = T as random groups. A walk that sized them otherwise
    // would end where CFITSIO goes on, and CFITSIO would read HDUs never checked (found
    // by fuzzing: a primary header that ran into an extension's cards, PCOUNT among
    // them, led CFITSIO to a compressed HDU past the input's end).
    SPEXD_ASSIGN_OR_RETURN(pcount, h.LastInt("PCOUNT", 0, 0, kAnyCount));
    SPEXD_ASSIGN_OR_RETURN(gcount, h.LastInt("GCOUNT", 1, 0, kAnyCount));
    if (s.naxis > 0 && values == 0 && h.Logical("GROUPS")) {
      SPEXD_ASSIGN_OR_RETURN(const std::int64_t naxis1, h.Int("NAXIS1", 0, kAnyCount));
      if (naxis1 == 0) {
        SPEXD_ASSIGN_OR_RETURN(values, AxesProduct(h, "NAXIS", s.naxis, limit, /*first=*/2));
      }
    }
  }
  const std::int64_t per_group = std::min(pcount, limit + 1) + values;
  s.bytes = MulCapped(MulCapped(per_group, gcount, limit), (bitpix < 0 ? -bitpix : bitpix) / 8,
                      limit);
  return s;
}

}  // namespace spexd::core::internal
