#include "core/io/internal/fits_layout.h"

#include <zlib.h>

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

namespace spexd::core {
namespace {

constexpr std::int64_t kRecord = 2880;  // FITS standard §3.1
constexpr std::size_t kCard = 80;
constexpr std::int64_t kMaxAxes = 999;    // §4.4.1.1
constexpr std::int64_t kMaxFields = 999;  // §7.2.1
// A tile-compressed image may expand far beyond its stored bytes (a constant mask packs
// into almost nothing), so its size is capped instead of bounded by the input: 4 GiB,
// about 30 times the float64 image of a whole DESI CCD (4128 x 4114 x 8 bytes). The
// readers bound their images further before reading them.
constexpr std::int64_t kMaxUncompressedBytes = std::int64_t{1} << 32;

// The keyword cards of one header, by name (the first card of a name wins, as in CFITSIO).
struct Header {
  std::int64_t start = 0;      // byte offset of the header
  std::int64_t data_start = 0;
  std::map<std::string, std::string> values;  // value field (columns 11-80) of "KEY = " cards
};

class LayoutChecker {
 public:
  LayoutChecker(FitsByteReader read, std::int64_t size, absl::string_view name)
      : read_(read), size_(size), name_(name) {}

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
        if (key == "END") {
          h.data_start = at + kRecord;
          extname_ = StringValue(h, "EXTNAME");
          return h;
        }
        if (text.substr(8, 2) == "= ") h.values.emplace(key, std::string(text.substr(10)));
      }
    }
  }

  // An integer keyword in [lo, hi]: digits with an optional sign, then a comment or blanks.
  absl::StatusOr<std::int64_t> Int(const Header& h, int hdu, const std::string& key,
                                   std::int64_t lo, std::int64_t hi) const {
    auto it = h.values.find(key);
    if (it == h.values.end()) return Invalid(hdu, absl::StrCat("missing keyword ", key));
    absl::string_view v = absl::StripLeadingAsciiWhitespace(it->second);
    const std::size_t slash = v.find('/');
    if (slash != absl::string_view::npos) v = v.substr(0, slash);
    v = absl::StripTrailingAsciiWhitespace(v);
    bool negative = false;
    if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
      negative = v[0] == '-';
      v.remove_prefix(1);
    }
    std::int64_t n = 0;
    bool ok = !v.empty() && v.size() <= 18;  // 18 digits cannot overflow
    for (char c : v) ok = ok && absl::ascii_isdigit(static_cast<unsigned char>(c));
    if (ok) {
      for (char c : v) n = n * 10 + (c - '0');
      if (negative) n = -n;
    }
    if (!ok || n < lo || n > hi) {
      return Invalid(hdu, absl::StrCat("keyword ", key, " must be an integer in [", lo, ", ", hi,
                                       "], got '", absl::StripAsciiWhitespace(it->second).substr(0, 30),
                                       "'"));
    }
    return n;
  }

  // A string keyword's text without its quotes and trailing blanks ("" when absent).
  static std::string StringValue(const Header& h, const std::string& key) {
    auto it = h.values.find(key);
    if (it == h.values.end()) return "";
    absl::string_view v = absl::StripLeadingAsciiWhitespace(it->second);
    if (v.empty() || v[0] != '\'') return "";
    v.remove_prefix(1);
    const std::size_t end = v.find('\'');
    return std::string(absl::StripTrailingAsciiWhitespace(v.substr(0, end)));
  }

  static bool Logical(const Header& h, const std::string& key) {
    auto it = h.values.find(key);
    if (it == h.values.end()) return false;
    absl::string_view v = absl::StripLeadingAsciiWhitespace(it->second);
    return !v.empty() && v[0] == 'T';
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

  // The product of `key`1..`key`N, refusing any that exceeds `limit` (`what` says why).
  absl::StatusOr<std::int64_t> AxesProduct(const Header& h, int hdu, const std::string& key,
                                           std::int64_t naxis, std::int64_t limit,
                                           absl::string_view what) const {
    std::int64_t product = naxis > 0 ? 1 : 0;
    for (std::int64_t i = 1; i <= naxis; ++i) {
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
  absl::StatusOr<std::int64_t> DataBytes(const Header& h, int hdu) const {
    const bool primary = h.start == 0;
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t value_bytes, ValueBytes(h, hdu, "BITPIX"));
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t naxis, Int(h, hdu, "NAXIS", 0, kMaxAxes));
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t values, AxesProduct(h, hdu, "NAXIS", naxis, size_,
                                                                 "truncated file"));
    std::int64_t pcount = 0, gcount = 1;
    if (!primary) {
      SPEXD_ASSIGN_OR_RETURN(pcount, Int(h, hdu, "PCOUNT", 0, size_));
      SPEXD_ASSIGN_OR_RETURN(gcount, Int(h, hdu, "GCOUNT", 0, size_));
    }
    // Each factor is at most size_ (< 2^63 / 2^40 for any input here), so this cannot
    // overflow once the product of the first two is checked.
    const std::int64_t per_group = pcount + values;
    if (gcount != 0 && per_group > size_ / gcount) {
      return Invalid(hdu, absl::StrCat("truncated file: the HDU announces more data than the ",
                                       size_, " bytes of the file"));
    }
    const std::int64_t bytes = value_bytes * gcount * per_group;
    if (!primary) {
      const std::string xtension = StringValue(h, "XTENSION");
      if (xtension == "BINTABLE" || xtension == "TABLE" || xtension == "A3DTABLE") {
        SPEXD_RETURN_IF_ERROR(CheckTable(h, hdu, xtension == "TABLE", naxis));
      }
    }
    return bytes;
  }

  absl::Status CheckTable(const Header& h, int hdu, bool ascii, std::int64_t naxis) const {
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
      SPEXD_ASSIGN_OR_RETURN(const std::int64_t zbytes, ValueBytes(h, hdu, "ZBITPIX"));
      SPEXD_ASSIGN_OR_RETURN(const std::int64_t znaxis, Int(h, hdu, "ZNAXIS", 0, kMaxAxes));
      SPEXD_ASSIGN_OR_RETURN(
          const std::int64_t zvalues,
          AxesProduct(h, hdu, "ZNAXIS", znaxis, kMaxUncompressedBytes / zbytes,
                      "tile-compressed image over 4 GiB"));
      (void)zvalues;
      SPEXD_RETURN_IF_ERROR(CheckGzipTiles(h, hdu, row_bytes, offsets, znaxis));
    }
    return absl::OkStatus();
  }

  // Tile-compressed images whose tiles are gzip streams (ZCMPTYPE GZIP_1 or GZIP_2, and
  // the GZIP_COMPRESSED_DATA column of any): each tile's stream is inflated here with its
  // output capped at the tile's size, and must end inside its bytes. CFITSIO 4.2.0 loops
  // for ever, growing its buffer, on a truncated gzip tile (found by fuzzing: a 20 KB
  // upload held a loader thread without end), and would inflate a bomb to any size.
  absl::Status CheckGzipTiles(const Header& h, int hdu, std::int64_t row_bytes,
                              const std::vector<std::int64_t>& offsets,
                              std::int64_t znaxis) const {
    const std::string cmptype = StringValue(h, "ZCMPTYPE");
    const bool gzip = cmptype == "GZIP_1" || cmptype == "GZIP_2";
    std::int64_t tile_values = 1;
    for (std::int64_t i = 1; i <= znaxis; ++i) {
      SPEXD_ASSIGN_OR_RETURN(const std::int64_t len,
                             Int(h, hdu, absl::StrCat("ZNAXIS", i), 0, kMaxUncompressedBytes));
      std::int64_t tile = i == 1 ? len : 1;
      if (h.values.count(absl::StrCat("ZTILE", i)) != 0) {
        SPEXD_ASSIGN_OR_RETURN(tile, Int(h, hdu, absl::StrCat("ZTILE", i), 1,
                                         std::max<std::int64_t>(len, 1)));
      }
      tile_values *= std::max<std::int64_t>(tile, 1);  // bounded: ZNAXISn product < 2^32
    }
    // 8 bytes a value bounds every pixel type CFITSIO stores in a gzip tile.
    const std::int64_t tile_cap = tile_values * 8;
    for (std::size_t c = 0; c < offsets.size(); ++c) {
      const std::int64_t col = static_cast<std::int64_t>(c) + 1;
      const std::string ttype = absl::AsciiStrToUpper(StringValue(h, absl::StrCat("TTYPE", col)));
      if (!((gzip && ttype == "COMPRESSED_DATA") || ttype == "GZIP_COMPRESSED_DATA")) continue;
      const char kind = DescriptorKind(h, col);
      if (kind == 0) continue;  // not a byte array in the heap: CFITSIO's business
      SPEXD_RETURN_IF_ERROR(
          InflateColumnTiles(h, hdu, row_bytes, offsets[c], kind == 'Q', tile_cap));
    }
    return absl::OkStatus();
  }

  // 'P' or 'Q' for a TFORMn of a variable-length byte array ("1PB(...)", "1QB(...)"), else 0.
  static char DescriptorKind(const Header& h, std::int64_t col) {
    std::string form = absl::AsciiStrToUpper(StringValue(h, absl::StrCat("TFORM", col)));
    std::size_t i = 0;
    while (i < form.size() && absl::ascii_isdigit(static_cast<unsigned char>(form[i]))) ++i;
    if (i + 1 >= form.size() || (form[i] != 'P' && form[i] != 'Q') || form[i + 1] != 'B') return 0;
    return form[i];
  }

  static std::int64_t BigEndian(const unsigned char* p, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
    return n == 4 ? static_cast<std::int64_t>(static_cast<std::int32_t>(v))
                  : static_cast<std::int64_t>(v);
  }

  absl::Status InflateColumnTiles(const Header& h, int hdu, std::int64_t row_bytes,
                                  std::int64_t column_offset, bool q, std::int64_t tile_cap) const {
    SPEXD_ASSIGN_OR_RETURN(const std::int64_t rows, Int(h, hdu, "NAXIS2", 0, size_));
    std::int64_t pcount = 0;
    if (h.values.count("PCOUNT") != 0) {
      SPEXD_ASSIGN_OR_RETURN(pcount, Int(h, hdu, "PCOUNT", 0, size_));
    }
    const std::int64_t table_end = row_bytes * rows;  // both bounded by the file size
    std::int64_t theap = table_end;
    if (h.values.count("THEAP") != 0) {
      SPEXD_ASSIGN_OR_RETURN(theap, Int(h, hdu, "THEAP", 0, table_end + pcount));
    }
    const std::int64_t heap_end = table_end + pcount;  // relative to the data start
    const int half = q ? 8 : 4;
    unsigned char desc[16];
    std::string in;
    std::string out(std::size_t{1} << 16, '\0');  // inflated into, a piece at a time
    for (std::int64_t r = 0; r < rows; ++r) {
      if (!read_(h.data_start + r * row_bytes + column_offset, 2 * half,
                 reinterpret_cast<char*>(desc))) {
        return Invalid(hdu, absl::StrCat("cannot read the descriptor of tile ", r + 1));
      }
      const std::int64_t count = BigEndian(desc, half);
      const std::int64_t offset = BigEndian(desc + half, half);
      if (count == 0) continue;
      if (count < 0 || offset < 0 || count > heap_end || offset > heap_end - theap - count) {
        return Invalid(hdu, absl::StrCat("tile ", r + 1, " of the compressed image lies outside "
                                         "the heap (", count, " bytes at ", offset, ")"));
      }
      in.resize(static_cast<std::size_t>(count));
      if (!read_(h.data_start + theap + offset, in.size(), in.data())) {
        return Invalid(hdu, absl::StrCat("cannot read tile ", r + 1, " of the compressed image"));
      }
      z_stream zs{};
      if (inflateInit2(&zs, 15 + 32) != Z_OK) {  // gzip or zlib header
        return absl::ResourceExhaustedError("cannot start zlib");
      }
      zs.next_in = reinterpret_cast<Bytef*>(in.data());
      zs.avail_in = static_cast<uInt>(in.size());
      int rc = Z_OK;
      // Each round consumes input or fills the piece (zlib returns Z_BUF_ERROR when it
      // can do neither), and the output is capped: the loop ends.
      while (rc == Z_OK && static_cast<std::int64_t>(zs.total_out) <= tile_cap) {
        zs.next_out = reinterpret_cast<Bytef*>(out.data());
        zs.avail_out = static_cast<uInt>(out.size());
        rc = inflate(&zs, Z_NO_FLUSH);
      }
      const uLong produced = zs.total_out;
      inflateEnd(&zs);
      if (rc != Z_STREAM_END || static_cast<std::int64_t>(produced) > tile_cap) {
        return Invalid(hdu, absl::StrCat(
            "tile ", r + 1, " of the compressed image is not a whole gzip stream of at most ",
            tile_cap, " bytes (corrupt, truncated, or larger than its tile)"));
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
  std::string extname_;  // of the HDU being checked, once its header is read
  const std::int64_t size_;
  const absl::string_view name_;
};

}  // namespace

absl::Status CheckFitsLayout(FitsByteReader read, std::int64_t size, absl::string_view name) {
  return LayoutChecker(read, size, name).Check();
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
