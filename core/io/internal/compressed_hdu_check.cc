#include "core/io/internal/compressed_hdu_check.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/io/internal/fits_card_value.h"
#include "core/io/internal/fits_header.h"
#include "core/io/internal/rice_stream_check.h"
#include "core/base/status_macros.h"

namespace spexd::core::internal {
namespace {

constexpr std::int64_t kMaxCompressDim = 6;  // CFITSIO's MAX_COMPRESS_DIM
// A tile-compressed image may expand far beyond its stored bytes (a constant mask packs
// into almost nothing), so its size is capped instead of bounded by the input: 4 GiB,
// about 30 times the float64 image of a whole DESI CCD (4128 x 4114 x 8 bytes). The
// readers bound their images further before reading them.
constexpr std::int64_t kMaxUncompressedBytes = std::int64_t{1} << 32;
// CFITSIO passes a tile's pixel count, and its size in bytes, as int: 2^28 pixels of 8
// bytes stay below 2^31 (a whole DESI CCD in one tile is 17 million pixels).
constexpr std::int64_t kMaxTilePixels = std::int64_t{1} << 28;
// The random table that dithered quantization indexes from ZDITHER0 (FITS 4.0 §10.3.3).
constexpr std::int64_t kDitherSeeds = 10000;

enum class Codec { kRice, kGzip1, kGzip2 };

// A variable-length array column (TFORMn = rPt(max) or rQt(max)): its descriptor kind
// ('P': two 32-bit integers, 'Q': two 64-bit) and element type, or kind 0 for any other.
struct ColumnForm {
  char kind = 0;
  char type = 0;
};

ColumnForm ParseColumnForm(const std::string& tform) {
  const std::string form = absl::AsciiStrToUpper(tform);
  std::size_t i = 0;
  while (i < form.size() && absl::ascii_isdigit(static_cast<unsigned char>(form[i]))) ++i;
  if (i + 1 >= form.size() || (form[i] != 'P' && form[i] != 'Q')) return {};
  return {form[i], form[i + 1]};
}

// Bytes of one element of a variable-length array of `type` (§7.3.5), 0 if not numeric.
std::int64_t ElementBytes(char type) {
  switch (type) {
    case 'B': return 1;
    case 'I': return 2;
    case 'J': case 'E': return 4;
    case 'K': case 'D': return 8;
    default: return 0;
  }
}

std::int64_t BigEndian(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return n == 4 ? static_cast<std::int64_t>(static_cast<std::int32_t>(v))
                : static_cast<std::int64_t>(v);
}

// A tile column that CFITSIO reads: its position in a row and its form.
struct TileColumn {
  std::string name;
  std::int64_t offset = 0;
  ColumnForm form;
};

class CompressedImageChecker {
 public:
  CompressedImageChecker(const CheckedBinaryTable& t, FitsByteReader read) : t_(t), read_(read) {}

  absl::Status Check() {
    // CFITSIO finds a keyword from where its last search ended, wrapping around, so with a
    // repeated card it may read another value than the one checked here.
    if (t_.repeated != nullptr) {
      for (const std::string& key : *t_.repeated) {
        if (ReadByCfitsio(key)) {
          return Invalid(absl::StrCat("keyword ", key, " appears more than once"));
        }
      }
    }
    SPEXD_RETURN_IF_ERROR(CheckCodec());
    SPEXD_RETURN_IF_ERROR(CheckImageShape());
    SPEXD_RETURN_IF_ERROR(CheckQuantization());
    if (codec_ == Codec::kRice) SPEXD_RETURN_IF_ERROR(CheckRiceParameters());
    SPEXD_RETURN_IF_ERROR(FindColumns());
    SPEXD_RETURN_IF_ERROR(CheckTiles());
    // As imcomp_get_compressed_image_par decides (see the header).
    const bool scaled = has_scale_column_;
    const std::string q = String("ZQUANTIZ");
    if ((float_ && !scaled) || q == "NONE") {
      quantization_ = TileQuantization::kSetsLossless;
    } else if (float_ && Field("ZQUANTIZ") != nullptr) {
      quantization_ = TileQuantization::kQuantizedFloat;
    }
    return absl::OkStatus();
  }

  TileQuantization quantization() const { return quantization_; }

 private:
  static absl::Status Invalid(absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("tile-compressed image: ", what));
  }

  // The keywords CFITSIO reads from a compressed image's header (Z*, T*: TTYPEn, TFORMn,
  // THEAP, ...; the structure and scaling).
  static bool ReadByCfitsio(const std::string& key) {
    return absl::StartsWith(key, "Z") || absl::StartsWith(key, "T") ||
           absl::StartsWith(key, "NAXIS") || key == "PCOUNT" || key == "GCOUNT" ||
           key == "BSCALE" || key == "BZERO" || key == "BLANK";
  }

  const std::string* Field(const std::string& key) const {
    auto it = t_.cards->find(key);
    return it == t_.cards->end() ? nullptr : &it->second;
  }

  std::string String(const std::string& key) const {
    const std::string* f = Field(key);
    return f == nullptr ? "" : absl::AsciiStrToUpper(CardString(*f));
  }

  // An integer keyword in [lo, hi], read by the header walk's card rules (`required`: else
  // nullopt when absent).
  absl::StatusOr<std::optional<std::int64_t>> Int(const std::string& key, std::int64_t lo,
                                                  std::int64_t hi, bool required) const {
    const std::string* f = Field(key);
    if (f == nullptr) {
      if (required) return Invalid(absl::StrCat("missing keyword ", key));
      return std::optional<std::int64_t>();
    }
    absl::StatusOr<std::int64_t> v = CardIntIn(key, *f, lo, hi);
    if (!v.ok()) return Invalid(v.status().message());
    return std::optional<std::int64_t>(*v);
  }

  absl::Status CheckCodec() {
    const std::string type = String("ZCMPTYPE");
    // As CFITSIO reads it (RICE_ONE is its alias of RICE_1).
    if (type == "RICE_1" || type == "RICE_ONE") {
      codec_ = Codec::kRice;
    } else if (type == "GZIP_1") {
      codec_ = Codec::kGzip1;
    } else if (type == "GZIP_2") {
      codec_ = Codec::kGzip2;
    } else {
      return Invalid(absl::StrCat(
          "ZCMPTYPE ", type.empty() ? "missing (or not a string)" : absl::StrCat("'", type, "'"),
          " is not accepted: spexd decodes only RICE_1, GZIP_1 and GZIP_2 tiles, what desispec "
          "and fpack write (HCOMPRESS_1 and PLIO_1 are refused)"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckImageShape() {
    SPEXD_ASSIGN_OR_RETURN(auto zbitpix, Int("ZBITPIX", -64, 64, true));
    const std::int64_t bits = *zbitpix;
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64 && bits != -32 && bits != -64) {
      return Invalid(absl::StrCat("ZBITPIX = ", bits, " is not one of 8, 16, 32, 64, -32, -64"));
    }
    const std::int64_t value_bytes = (bits < 0 ? -bits : bits) / 8;
    float_ = bits < 0;
    pixel_bytes_ = static_cast<int>((bits < 0 ? -bits : bits) / 8);
    SPEXD_ASSIGN_OR_RETURN(auto znaxis, Int("ZNAXIS", 1, kMaxCompressDim, true));
    std::int64_t values = 1, tiles = 1, tile_pixels = 1;
    for (std::int64_t i = 1; i <= *znaxis; ++i) {
      SPEXD_ASSIGN_OR_RETURN(auto len, Int(absl::StrCat("ZNAXIS", i), 1, kMaxUncompressedBytes,
                                           true));
      if (values > kMaxUncompressedBytes / value_bytes / *len) {
        return Invalid("the image (ZNAXISn) is over 4 GiB once decoded");
      }
      values *= *len;
      // Default tiles (§10.1.1): whole rows.
      SPEXD_ASSIGN_OR_RETURN(auto tile, Int(absl::StrCat("ZTILE", i), 1, *len, false));
      const std::int64_t edge = tile.value_or(i == 1 ? *len : 1);
      axes_.push_back(*len);
      tile_.push_back(edge);
      tiles *= (*len + edge - 1) / edge;  // at most `values`
      tile_pixels *= edge;
    }
    if (tile_pixels > kMaxTilePixels) {
      return Invalid(absl::StrCat("a tile (ZTILEn) of ", tile_pixels, " pixels is over the ",
                                  kMaxTilePixels, " CFITSIO can address"));
    }
    // One row per tile (§10.1): CFITSIO refuses another count, but only after reading it.
    if (tiles != t_.rows) {
      return Invalid(absl::StrCat("the table has ", t_.rows, " rows but ZNAXISn and ZTILEn make ",
                                  tiles, " tiles"));
    }
    return absl::OkStatus();
  }

  // Dithered quantization (§10.3.3) indexes a table of kDitherSeeds random values from
  // ZDITHER0 + tile - 1 without a bound in CFITSIO: a ZDITHER0 outside 1..10000 reads
  // outside it. The check applies whatever ZQUANTIZ says, since CFITSIO keeps the
  // quantization method of an earlier HDU in some cases; writers only give 1..10000.
  absl::Status CheckQuantization() {
    if (Field("ZQUANTIZ") != nullptr) {
      const std::string q = String("ZQUANTIZ");
      if (q != "NONE" && q != "NO_DITHER" && q != "SUBTRACTIVE_DITHER_1" &&
          q != "SUBTRACTIVE_DITHER_2") {
        return Invalid(absl::StrCat("ZQUANTIZ '", q, "' is not NONE, NO_DITHER, "
                                    "SUBTRACTIVE_DITHER_1 or SUBTRACTIVE_DITHER_2"));
      }
    }
    return Int("ZDITHER0", 1, kDitherSeeds, false).status();
  }

  // RICE_1's parameters as CFITSIO reads them: ZVAL1 is the block size whatever ZNAME1
  // says, ZVAL2 the bytes per value unless ZNAME2 is the old NOISEBIT (then 4, as when
  // absent). Names, when given, must match, so that no other reader sees other values.
  absl::Status CheckRiceParameters() {
    const std::string name1 = String("ZNAME1");
    if (Field("ZNAME1") != nullptr && name1 != "BLOCKSIZE") {
      return Invalid(absl::StrCat("RICE_1 needs ZNAME1 = 'BLOCKSIZE', got '", name1, "'"));
    }
    SPEXD_ASSIGN_OR_RETURN(auto blocksize, Int("ZVAL1", INT32_MIN, INT32_MAX, true));
    // 16 or 32 (§10.4.1); CFITSIO divides by it (0: SIGFPE) and loops by it.
    if (*blocksize != 16 && *blocksize != 32) {
      return Invalid(absl::StrCat("RICE_1 BLOCKSIZE (ZVAL1) must be 16 or 32, got ", *blocksize));
    }
    blocksize_ = static_cast<int>(*blocksize);
    const std::string name2 = String("ZNAME2");
    if (name2 == "NOISEBIT") {
      bytepix_ = 4;  // ZVAL2 unused
      return absl::OkStatus();
    }
    if (Field("ZNAME2") != nullptr && name2 != "BYTEPIX") {
      return Invalid(absl::StrCat("RICE_1 needs ZNAME2 = 'BYTEPIX', got '", name2, "'"));
    }
    SPEXD_ASSIGN_OR_RETURN(auto bytepix, Int("ZVAL2", 1, 8, false));
    bytepix_ = static_cast<int>(bytepix.value_or(4));
    if (bytepix_ != 1 && bytepix_ != 2 && bytepix_ != 4 && bytepix_ != 8) {
      return Invalid(absl::StrCat("RICE_1 BYTEPIX (ZVAL2) must be 1, 2, 4 or 8, got ", bytepix_));
    }
    // A float image decoded as lossless reads 1- and 2-byte tiles as 8-byte values, past
    // the tile's buffer; quantized floats are 4-byte integers (CFITSIO writes BYTEPIX 4).
    if (float_ && bytepix_ < 4) {
      return Invalid(absl::StrCat("RICE_1 BYTEPIX (ZVAL2) ", bytepix_,
                                  " for a float image (ZBITPIX < 0): must be 4 or 8"));
    }
    return absl::OkStatus();
  }

  // The columns CFITSIO reads tiles from (imcomp_get_compressed_image_par): the first of
  // each name, as it finds them.
  absl::Status FindColumns() {
    const std::int64_t ncols = static_cast<std::int64_t>(t_.column_offsets.size());
    for (std::int64_t c = 1; c <= ncols; ++c) {
      const std::string name = String(absl::StrCat("TTYPE", c));
      const bool known = name == "COMPRESSED_DATA" || name == "GZIP_COMPRESSED_DATA" ||
                         name == "UNCOMPRESSED_DATA";
      const bool scalar = name == "ZSCALE" || name == "ZZERO" || name == "ZBLANK";
      if (!known && !scalar) continue;
      const std::string* tform_field = Field(absl::StrCat("TFORM", c));
      const std::string tform = tform_field == nullptr ? "" : CardString(*tform_field);
      const ColumnForm form = ParseColumnForm(tform);
      if (scalar) {
        if (form.kind != 0) return Invalid(absl::StrCat("column ", name, " is variable-length"));
        has_scale_column_ = has_scale_column_ || name != "ZBLANK";
        continue;
      }
      if (std::any_of(columns_.begin(), columns_.end(),
                      [&](const TileColumn& t) { return t.name == name; })) {
        continue;
      }
      // Compressed tiles are byte streams; uncompressed ones numbers.
      const bool bytes = name != "UNCOMPRESSED_DATA";
      if (form.kind == 0 || (bytes ? form.type != 'B' : ElementBytes(form.type) == 0)) {
        return Invalid(absl::StrCat("column ", name, " has TFORM '", tform, "', not a ",
                                    bytes ? "variable-length byte array (1PB or 1QB)"
                                          : "variable-length numeric array"));
      }
      columns_.push_back({name, t_.column_offsets[static_cast<std::size_t>(c - 1)], form});
    }
    if (std::none_of(columns_.begin(), columns_.end(),
                     [](const TileColumn& t) { return t.name == "COMPRESSED_DATA"; })) {
      return Invalid("no COMPRESSED_DATA column");
    }
    return absl::OkStatus();
  }

  // Pixels of tile `row` (0-based; the first axis varies fastest, §10.1): edge tiles are
  // cut at the image's end.
  std::int64_t TilePixels(std::int64_t row) const {
    std::int64_t pixels = 1;
    for (std::size_t i = 0; i < axes_.size(); ++i) {
      const std::int64_t n = (axes_[i] + tile_[i] - 1) / tile_[i];
      const std::int64_t at = row % n * tile_[i];
      row /= n;
      pixels *= std::min(tile_[i], axes_[i] - at);
    }
    return pixels;
  }

  absl::Status CheckTiles() {
    const std::int64_t table_end = t_.row_bytes * t_.rows;  // both bounded by the file size
    const std::int64_t heap_end = table_end + t_.heap_bytes;
    SPEXD_ASSIGN_OR_RETURN(auto theap, Int("THEAP", 0, heap_end, false));
    const std::int64_t heap = theap.value_or(table_end);
    std::string stream;
    for (std::int64_t r = 0; r < t_.rows; ++r) {
      const std::int64_t pixels = TilePixels(r);
      for (const TileColumn& col : columns_) {
        const int half = col.form.kind == 'Q' ? 8 : 4;
        unsigned char desc[16];
        if (!read_(t_.data_start + r * t_.row_bytes + col.offset, 2 * half,
                   reinterpret_cast<char*>(desc))) {
          return Invalid(absl::StrCat("cannot read the ", col.name, " descriptor of tile ", r + 1));
        }
        const std::int64_t count = BigEndian(desc, half);
        const std::int64_t offset = BigEndian(desc + half, half);
        const std::int64_t element = ElementBytes(col.form.type);
        if (count == 0) continue;
        if (count < 0 || offset < 0 || count > heap_end / element ||
            offset > heap_end - heap - count * element) {
          return Invalid(absl::StrCat("tile ", r + 1, " (", col.name, ") lies outside the heap (",
                                      count, " values at ", offset, ")"));
        }
        if (col.name == "UNCOMPRESSED_DATA") {
          // CFITSIO reads all `count` values into the tile's buffer.
          if (count > pixels) {
            return Invalid(absl::StrCat("tile ", r + 1, " holds ", count,
                                        " uncompressed values for ", pixels, " pixels"));
          }
          continue;
        }
        stream.resize(static_cast<std::size_t>(count));
        if (!read_(t_.data_start + heap + offset, stream.size(), stream.data())) {
          return Invalid(absl::StrCat("cannot read tile ", r + 1));
        }
        // A float image's gzip tile must hold 4 or 8 bytes a pixel: CFITSIO reads 1- and
        // 2-byte tiles of a lossless float image as 8-byte values, past the buffer.
        const bool float_gzip = float_ && col.name == "COMPRESSED_DATA";
        // A GZIP_COMPRESSED_DATA tile (a float tile kept unquantized) is read with the
        // pixel size its inflated length gives: the readers take float images as doubles
        // (FitsFile::ReadImage<double>), which CFITSIO converts from 8 bytes a pixel, or from
        // 4 for a ZBITPIX -32 image; a -64 image's tile of 4 bytes a pixel makes it convert
        // from a buffer it never allocated (found by fuzzing: a null dereference, SIGSEGV).
        const bool unquantized = col.name == "GZIP_COMPRESSED_DATA" && float_;
        std::int64_t produced = 0;
        absl::Status st =
            col.name == "COMPRESSED_DATA" && codec_ == Codec::kRice
                ? CheckRiceStream(stream, pixels, blocksize_, bytepix_)
                : CheckGzipStream(stream, pixels * 8, float_gzip ? pixels * 4 : 0, &produced);
        if (st.ok() && unquantized && produced != pixels * 8 &&
            !(pixel_bytes_ == 4 && produced == pixels * 4)) {
          st = absl::InvalidArgumentError(absl::StrCat(
              "is an unquantized float tile of ", produced, " bytes for ", pixels,
              " pixels: CFITSIO reads 8 bytes a pixel", pixel_bytes_ == 4 ? " or 4" : "",
              " of a ZBITPIX ", pixel_bytes_ == 4 ? -32 : -64, " image as doubles"));
        }
        if (!st.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("tile ", r + 1, " of the compressed image ", st.message()));
        }
      }
    }
    return absl::OkStatus();
  }

  // A gzip tile (GZIP_1, GZIP_2, or any GZIP_COMPRESSED_DATA) inflated with its output
  // capped at `cap` bytes (8 a pixel bounds every type), which must end inside its bytes.
  // CFITSIO 4.2.0 loops for ever, growing its buffer, on a truncated gzip tile (found by
  // fuzzing: a 20 KB upload held a loader thread without end), and would inflate a bomb
  // to any size.
  absl::Status CheckGzipStream(std::string& in, std::int64_t cap, std::int64_t min_bytes,
                               std::int64_t* produced_bytes) {
    out_.resize(std::size_t{1} << 16);  // inflated into, a piece at a time
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) {  // gzip or zlib header
      return absl::ResourceExhaustedError("cannot start zlib");
    }
    zs.next_in = reinterpret_cast<Bytef*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    // Each round consumes input or fills the piece (zlib returns Z_BUF_ERROR when it can
    // do neither), and the output is capped: the loop ends.
    while (rc == Z_OK && static_cast<std::int64_t>(zs.total_out) <= cap) {
      zs.next_out = reinterpret_cast<Bytef*>(out_.data());
      zs.avail_out = static_cast<uInt>(out_.size());
      rc = inflate(&zs, Z_NO_FLUSH);
    }
    const uLong produced = zs.total_out;
    inflateEnd(&zs);
    *produced_bytes = static_cast<std::int64_t>(produced);
    if (rc != Z_STREAM_END || static_cast<std::int64_t>(produced) > cap) {
      return absl::InvalidArgumentError(absl::StrCat(
          "is not a whole gzip stream of at most ", cap,
          " bytes (corrupt, truncated, or larger than its tile)"));
    }
    if (static_cast<std::int64_t>(produced) < min_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "is a float tile of ", produced, " bytes, under 4 bytes a pixel (", min_bytes, ")"));
    }
    return absl::OkStatus();
  }

  const CheckedBinaryTable& t_;
  FitsByteReader read_;
  Codec codec_ = Codec::kRice;
  int blocksize_ = 32;
  int bytepix_ = 4;
  std::vector<std::int64_t> axes_, tile_;  // ZNAXISn, ZTILEn
  std::vector<TileColumn> columns_;
  std::string out_;  // gzip output, discarded
  bool float_ = false;            // ZBITPIX < 0
  int pixel_bytes_ = 4;            // |ZBITPIX| / 8
  bool has_scale_column_ = false;  // a ZSCALE or ZZERO column
  TileQuantization quantization_ = TileQuantization::kNone;
};

}  // namespace

absl::Status CheckCompressedImage(const CheckedBinaryTable& table, FitsByteReader read,
                                  TileQuantization* quantization) {
  CompressedImageChecker checker(table, read);
  SPEXD_RETURN_IF_ERROR(checker.Check());
  *quantization = checker.quantization();
  return absl::OkStatus();
}

}  // namespace spexd::core::internal
