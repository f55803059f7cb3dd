#include "tests/compressed_fits.h"

#include <fitsio.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

absl::Status Cfitsio(int status, absl::string_view what) {
  if (status == 0) return absl::OkStatus();
  char text[FLEN_STATUS] = {0};
  fits_get_errstatus(status, text);
  return absl::InternalError(absl::StrCat(what, ": CFITSIO ", status, " ", text));
}

// A fresh file name in this process's temporary directory.
std::string TempPath(const std::string& what) {
  static const std::string dir = MakeTempDir();
  static std::atomic<int> n{0};
  return absl::StrCat(dir, "/", n++, "-", what, ".fits");
}

// Where an HDU lies in the file; for a tile-compressed image also its first tile's stream.
struct HduSpan {
  long long header = 0, data = 0;
  long long tile1 = -1, tile1_bytes = 0;
};

absl::StatusOr<HduSpan> FindHdu(const std::string& fits, const std::string& extname) {
  const std::string path = TempPath("find");
  if (!WriteBytes(path, fits)) return absl::InternalError("cannot write " + path);
  fitsfile* f = nullptr;
  int status = 0;
  fits_open_diskfile(&f, path.c_str(), READONLY, &status);
  if (status != 0) return Cfitsio(status, "opening");
  HduSpan span;
  long long end = 0;
  fits_movnam_hdu(f, ANY_HDU, const_cast<char*>(extname.c_str()), 0, &status);
  fits_get_hduaddrll(f, &span.header, &span.data, &end, &status);
  if (status == 0 && fits_is_compressed_image(f, &status)) {
    int col = 0;
    long long len = 0, offset = 0;
    fits_get_colnum(f, CASEINSEN, const_cast<char*>("COMPRESSED_DATA"), &col, &status);
    fits_read_descriptll(f, col, 1, &len, &offset, &status);
    span.tile1 = span.data + f->Fptr->heapstart + offset;
    span.tile1_bytes = len;
  }
  int close_status = 0;
  fits_close_file(f, &close_status);
  std::remove(path.c_str());
  if (status != 0) return Cfitsio(status, absl::StrCat("finding HDU ", extname));
  return span;
}

absl::Status SetCompression(fitsfile* out, const TileCompression& c, int* status) {
  fits_set_compression_type(out, c.codec, status);
  if (!c.tile.empty()) {
    std::vector<long> tile = c.tile;
    fits_set_tile_dim(out, static_cast<int>(tile.size()), tile.data(), status);
  }
  if (c.quantize) {
    fits_set_quantize_level(out, 4.0f, status);
    fits_set_quantize_method(out, SUBTRACTIVE_DITHER_1, status);
    fits_set_dither_seed(out, 1234, status);  // reproducible bytes
  } else {
    fits_set_quantize_level(out, 0.0f, status);  // lossless
  }
  if (c.codec == HCOMPRESS_1) {
    fits_set_hcomp_scale(out, 0.0f, status);
    fits_set_hcomp_smooth(out, 0, status);
  }
  return Cfitsio(*status, "setting the compression");
}

}  // namespace

absl::StatusOr<std::string> RecompressHdus(const std::string& fits,
                                           const std::map<std::string, TileCompression>& hdus) {
  const std::string in_path = TempPath("in"), out_path = TempPath("out");
  if (!WriteBytes(in_path, fits)) return absl::InternalError("cannot write " + in_path);
  fitsfile* in = nullptr;
  fitsfile* out = nullptr;
  int status = 0;
  fits_open_diskfile(&in, in_path.c_str(), READONLY, &status);
  fits_create_diskfile(&out, out_path.c_str(), &status);
  int nhdu = 0;
  fits_get_num_hdus(in, &nhdu, &status);
  absl::Status result = Cfitsio(status, "opening");
  for (int i = 1; i <= nhdu && result.ok(); ++i) {
    fits_movabs_hdu(in, i, nullptr, &status);
    char name[FLEN_VALUE] = {0};
    int key_status = 0;
    fits_read_key(in, TSTRING, "EXTNAME", name, nullptr, &key_status);
    auto it = key_status == 0 ? hdus.find(name) : hdus.end();
    if (it == hdus.end()) {
      fits_copy_hdu(in, out, 0, &status);
      result = Cfitsio(status, "copying an HDU");
      continue;
    }
    if (i == 1) fits_create_img(out, BYTE_IMG, 0, nullptr, &status);  // an empty primary
    result = SetCompression(out, it->second, &status);
    if (!result.ok()) break;
    fits_img_compress(in, out, &status);
    fits_update_key_str(out, "EXTNAME", name, nullptr, &status);
    fits_set_compression_type(out, 0, &status);  // later HDUs copied as they are
    result = Cfitsio(status, absl::StrCat("compressing ", name));
  }
  int close_status = 0;
  if (out != nullptr) fits_close_file(out, &close_status);
  if (in != nullptr) fits_close_file(in, &close_status);
  std::string bytes = ReadBytes(out_path);
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  if (!result.ok()) return result;
  if (close_status != 0) return Cfitsio(close_status, "closing");
  return bytes;
}

absl::StatusOr<std::string> WithHduCard(const std::string& fits, const std::string& extname,
                                        const std::string& key, const std::string& value) {
  absl::StatusOr<HduSpan> span = FindHdu(fits, extname);
  if (!span.ok()) return span.status();
  std::string name = key;
  name.resize(8, ' ');
  name += "= ";
  std::string out = fits;
  for (long long at = span->header; at + 80 <= span->data; at += 80) {
    if (out.compare(static_cast<std::size_t>(at), 10, name) == 0) {
      std::string field = value;
      field.resize(70, ' ');
      out.replace(static_cast<std::size_t>(at) + 10, 70, field);
      return out;
    }
  }
  return absl::NotFoundError(absl::StrCat("no card ", key, " in HDU ", extname));
}

absl::StatusOr<std::pair<long long, long long>> FirstTile(const std::string& fits,
                                                          const std::string& extname) {
  absl::StatusOr<HduSpan> span = FindHdu(fits, extname);
  if (!span.ok()) return span.status();
  if (span->tile1 < 0) return absl::NotFoundError("not a tile-compressed image: " + extname);
  return std::make_pair(span->tile1, span->tile1_bytes);
}

absl::StatusOr<std::string> WithHcompressTileShape(const std::string& fits,
                                                   const std::string& extname, int nx, int ny) {
  absl::StatusOr<HduSpan> span = FindHdu(fits, extname);
  if (!span.ok()) return span.status();
  if (span->tile1 < 0 || span->tile1_bytes < 14) {
    return absl::NotFoundError(absl::StrCat("HDU ", extname, " has no HCOMPRESS tile"));
  }
  std::string out = fits;
  const std::size_t at = static_cast<std::size_t>(span->tile1);
  if (static_cast<unsigned char>(out[at]) != 0xDD || static_cast<unsigned char>(out[at + 1]) != 0x99) {
    return absl::FailedPreconditionError("the first tile is not an HCOMPRESS stream");
  }
  // The stream header (fits_hdecompress.c): 2 magic bytes, then nx, ny and the scale as
  // big-endian 32-bit integers.
  for (int i = 0; i < 4; ++i) {
    out[at + 2 + i] = static_cast<char>((static_cast<unsigned>(nx) >> (24 - 8 * i)) & 0xff);
    out[at + 6 + i] = static_cast<char>((static_cast<unsigned>(ny) >> (24 - 8 * i)) & 0xff);
  }
  return out;
}

absl::StatusOr<std::vector<CrashInput>> CrashInputs(const std::string& preproc,
                                                    const std::string& psf) {
  std::vector<CrashInput> out;
  auto add = [&](const std::string& name, bool is_psf,
                 absl::StatusOr<std::string> bytes) -> absl::Status {
    if (!bytes.ok()) return absl::Status(bytes.status().code(), name + ": " + std::string(bytes.status().message()));
    out.push_back({name, is_psf, *std::move(bytes)});
    return absl::OkStatus();
  };
  const TileCompression rice{RICE_1, false, {}};
  const TileCompression hcompress{HCOMPRESS_1, false, {}};
  auto mask = [&](const TileCompression& c) { return RecompressHdus(preproc, {{"MASK", c}}); };
  auto image = [&](int codec) {
    return RecompressHdus(preproc, {{"IMAGE", {codec, true, {}}}, {"MASK", rice}});
  };
  auto patched = [](absl::StatusOr<std::string> base, const std::string& hdu,
                    const std::string& key, const std::string& value) -> absl::StatusOr<std::string> {
    if (!base.ok()) return base.status();
    return WithHduCard(*base, hdu, key, value);
  };
  // a. RICE_1 with BLOCKSIZE (ZVAL1) 0: SIGFPE; HCOMPRESS data relabelled RICE_1 (its
  // ZVAL1, the scale, is 0); a PSF whose XTRACE is RICE-compressed with BLOCKSIZE 0.
  absl::Status st = add("rice-blocksize-0.fits", false, patched(mask(rice), "MASK", "ZVAL1", "0"));
  if (st.ok()) {
    st = add("hcompress-relabelled-rice.fits", false,
             patched(mask(hcompress), "MASK", "ZCMPTYPE", "'RICE_1'"));
  }
  if (st.ok()) {
    st = add("psf-xtrace-rice-blocksize-0.fits", true,
             patched(RecompressHdus(psf, {{"XTRACE", {RICE_1, true, {}}}}), "XTRACE", "ZVAL1", "0"));
  }
  // b. Dithered float tiles with ZDITHER0 outside 1..10000: SIGSEGV.
  for (auto [codec, name] : {std::pair<int, const char*>{RICE_1, "rice"}, {GZIP_2, "gzip2"},
                             {HCOMPRESS_1, "hcompress"}}) {
    if (!st.ok()) break;
    st = add(absl::StrCat(name, "-zdither0-negative.fits"), false,
             patched(image(codec), "IMAGE", "ZDITHER0", "-100000"));
  }
  // c. An HCOMPRESS_1 stream claiming more pixels than its tile: a heap write overflow.
  if (st.ok()) {
    absl::StatusOr<std::string> h = mask(hcompress);
    st = add("hcompress-stream-larger-than-tile.fits", false,
             h.ok() ? WithHcompressTileShape(*h, "MASK", 4096, 4096) : h);
  }
  // RICE data labelled PLIO_1 decoded; a PSF with PSFERROR = -1 loaded.
  if (st.ok()) {
    st = add("rice-labelled-plio.fits", false, patched(mask(rice), "MASK", "ZCMPTYPE", "'PLIO_1'"));
  }
  if (st.ok()) st = add("psf-psferror-negative.fits", true, WithHduCard(psf, "PSF", "PSFERROR", "-1."));
  if (!st.ok()) return st;
  return out;
}

}  // namespace spexd::testing
