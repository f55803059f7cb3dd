// Tile-compressed HDUs are checked before CFITSIO decodes them (core/compressed_hdu_check):
// the crash inputs are refused with INVALID_ARGUMENT on every read path, the
// codecs DESI files use still read, and the RICE stream walk agrees with CFITSIO's decoder.
#include "core/io/internal/compressed_hdu_check.h"

#include <fitsio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/io/fits_file.h"
#include "core/io/internal/fits_layout.h"
#include "core/io/internal/gzip.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/io/internal/rice_stream_check.h"
#include "gtest/gtest.h"
#include "tests/compressed_fits.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

extern "C" {  // CFITSIO's RICE coder (exported, declared only in its private fitsio2.h)
int fits_rcomp_short(short a[], int nx, unsigned char* c, int clen, int nblock);
int fits_rdecomp_short(unsigned char* c, int clen, unsigned short array[], int nx, int nblock);
}

namespace spexd::core {
namespace {

using testing::CrashInput;
using testing::TileCompression;

struct Files {
  std::string preproc, psf;
  std::vector<CrashInput> crashes;
};

const Files& TestFiles() {
  static const Files* files = [] {
    auto* f = new Files;
    auto psf = testing::LoadBundledPsf();
    EXPECT_NE(psf, nullptr);
    if (psf == nullptr) return f;
    auto preproc = testing::MakeSyntheticPreproc(*psf, {});
    EXPECT_TRUE(preproc.ok()) << preproc.status();
    f->preproc = preproc.value_or("");
    f->psf = testing::ReadBytes(testing::BundledPsfPath());
    auto crashes = testing::CrashInputs(f->preproc, f->psf);
    EXPECT_TRUE(crashes.ok()) << crashes.status();
    if (crashes.ok()) f->crashes = *std::move(crashes);
    return f;
  }();
  return *files;
}

absl::Status ReadAny(const std::string& bytes, bool psf) {
  if (psf) return Psf::LoadFromMemory(bytes.data(), bytes.size(), "up.fits").status();
  return ReadPreprocFromMemory(bytes.data(), bytes.size(), "up.fits", {}).status();
}

absl::Status ReadAnyFromDisk(const std::string& bytes, bool psf) {
  const std::string path = testing::MakeTempDir() + "/in.fits";
  EXPECT_TRUE(testing::WriteBytes(path, bytes));
  if (psf) return Psf::Load(path).status();
  return ReadPreproc(path, {}).status();
}

TEST(CompressedHduCheckTest, CrashInputsAreRefusedOnEveryReadPath) {
  const Files& f = TestFiles();
  ASSERT_EQ(f.crashes.size(), 9u);
  for (const CrashInput& c : f.crashes) {
    SCOPED_TRACE(c.name);
    const absl::Status memory = ReadAny(c.bytes, c.psf);
    EXPECT_EQ(memory.code(), absl::StatusCode::kInvalidArgument) << memory;
    const absl::Status disk = ReadAnyFromDisk(c.bytes, c.psf);
    EXPECT_EQ(disk.code(), absl::StatusCode::kInvalidArgument) << disk;
    auto gz = GzipCompress(c.bytes);  // a .fits.gz upload is inflated, then checked
    ASSERT_TRUE(gz.ok());
    const absl::Status gzipped = ReadAny(*gz, c.psf);
    EXPECT_EQ(gzipped.code(), absl::StatusCode::kInvalidArgument) << gzipped;
    EXPECT_EQ(memory.message(), gzipped.message());
    if (!c.psf || c.name != "psf-psferror-negative.fits") {
      // Refused by the layout check, before CFITSIO opens the file.
      EXPECT_EQ(CheckFitsLayout(c.bytes.data(), c.bytes.size(), "up.fits").code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(CompressedHduCheckTest, RefusalsNameTheHduAndWhy) {
  const Files& f = TestFiles();
  const std::map<std::string, std::vector<std::string>> expected = {
      {"rice-blocksize-0.fits", {"[MASK]", "BLOCKSIZE (ZVAL1) must be 16 or 32, got 0"}},
      {"hcompress-relabelled-rice.fits", {"[MASK]", "ZNAME1 = 'BLOCKSIZE'"}},
      {"psf-xtrace-rice-blocksize-0.fits", {"[XTRACE]", "BLOCKSIZE"}},
      {"rice-zdither0-negative.fits", {"[IMAGE]", "ZDITHER0", "-100000"}},
      {"gzip2-zdither0-negative.fits", {"[IMAGE]", "ZDITHER0"}},
      {"hcompress-zdither0-negative.fits", {"[IMAGE]", "HCOMPRESS_1"}},
      {"hcompress-stream-larger-than-tile.fits", {"[MASK]", "HCOMPRESS_1", "not accepted"}},
      {"rice-labelled-plio.fits", {"[MASK]", "PLIO_1", "not accepted"}},
      {"psf-psferror-negative.fits", {"PSFERROR = -1 is negative"}},
  };
  for (const CrashInput& c : f.crashes) {
    SCOPED_TRACE(c.name);
    const std::string message(ReadAny(c.bytes, c.psf).message());
    ASSERT_EQ(expected.count(c.name), 1u);
    for (const std::string& needle : expected.at(c.name)) {
      EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
  }
}

// No false refusals: the codecs desispec and fpack write still decode, to the same pixels.
TEST(CompressedHduCheckTest, AcceptedCodecsStillDecode) {
  const Files& f = TestFiles();
  auto plain = ReadPreprocFromMemory(f.preproc.data(), f.preproc.size(), "p.fits", {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (int codec : {RICE_1, GZIP_1, GZIP_2}) {
    SCOPED_TRACE(codec);
    // MASK lossless; IMAGE and IVAR quantized (dithered) in the same codec, IMAGE with
    // tiles of 7 rows (a cut last tile).
    auto bytes = testing::RecompressHdus(
        f.preproc, {{"MASK", {codec, false, {}}},
                    {"IMAGE", {codec, true, {plain->width, 7}}},
                    {"IVAR", {codec, true, {}}}});
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    auto read = ReadPreprocFromMemory(bytes->data(), bytes->size(), "c.fits", {});
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->n_masked, plain->n_masked);  // the MASK decoded and applied
    ASSERT_EQ(read->image.size(), plain->image.size());
    std::size_t close = 0;
    for (std::size_t i = 0; i < read->image.size(); ++i) {
      close += std::abs(read->image[i] - plain->image[i]) <= 2.0 + 0.05 * std::abs(plain->image[i]);
    }
    EXPECT_EQ(close, read->image.size());  // quantized at a quarter of the noise
  }
  // A PSF whose XTRACE is RICE-quantized, or GZIP_2 lossless (the same traces).
  auto psf = Psf::LoadFromMemory(f.psf.data(), f.psf.size(), "psf.fits");
  ASSERT_TRUE(psf.ok());
  for (const TileCompression& c : {TileCompression{RICE_1, true, {}},
                                   TileCompression{GZIP_2, false, {}}}) {
    auto bytes = testing::RecompressHdus(f.psf, {{"XTRACE", c}, {"YTRACE", c}});
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    auto loaded = Psf::LoadFromMemory(bytes->data(), bytes->size(), "psf.fits");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const double w = 0.5 * (psf->wavemin() + psf->wavemax());
    EXPECT_NEAR(loaded->X(7, w), psf->X(7, w), c.quantize ? 0.5 : 0.0);
  }
  // PSFERROR = 0 (what DESI's PSFs carry) still loads.
  auto zero = testing::WithHduCard(f.psf, "PSF", "PSFERROR", "0.");
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(Psf::LoadFromMemory(zero->data(), zero->size(), "psf.fits").ok());
}

// Files astropy wrote (desispec's writer: CompImageHDU, RICE_1 by default; and GZIP_1), by
// tests/fuzz/make_seeds.py: accepted as they are.
TEST(CompressedHduCheckTest, AstropyWrittenMasksAreAccepted) {
  const std::string fuzz = std::string(SPEXD_TEST_DATA_DIR) + "/../fuzz/corpus/";
  for (const std::string name : {"compressed/preproc-astropy-rice-mask.fits",
                                 "preproc/preproc-f64-compressed-mask.fits"}) {
    const std::string bytes = testing::ReadBytes(fuzz + name);
    ASSERT_FALSE(bytes.empty()) << name;
    auto read = ReadPreprocFromMemory(bytes.data(), bytes.size(), name, {});
    EXPECT_TRUE(read.ok()) << read.status();
    // MASK bit 0 at one pixel (desispec masks it) and a negative ivar at another.
    EXPECT_EQ(read.ok() ? read->n_masked : 0, 2u) << name;
  }
}

// Lossless float tiles (IVAR, GZIP_2) beside quantized ones (IMAGE): CFITSIO 4.2 decodes the
// quantized HDU as lossless once it has read the lossless one (found writing these tests:
// every IMAGE pixel wrong, no error). Refused; so are float tiles of 1 or 2 bytes a pixel,
// which that lossless path reads as 8-byte values, past the tile's buffer.
// The compressed fuzz target's seeds in the accepted codecs read as they are.
TEST(CompressedHduCheckTest, FuzzSeedsInAcceptedCodecsRead) {
  const std::string dir = std::string(SPEXD_TEST_DATA_DIR) + "/../fuzz/corpus/compressed/";
  for (const std::string name : {"preproc-rice-mask-rice-image.fits",
                                 "preproc-gzip1-mask-gzip2-image.fits"}) {
    const std::string bytes = testing::ReadBytes(dir + name);
    EXPECT_TRUE(ReadAny(bytes, false).ok()) << name << ": " << ReadAny(bytes, false);
  }
  const std::string psf = testing::ReadBytes(dir + "psf-rice-xtrace-gzip2-ytrace.fits");
  EXPECT_TRUE(ReadAny(psf, true).ok()) << ReadAny(psf, true);
}

TEST(CompressedHduCheckTest, MixedQuantizationAndNarrowFloatTilesAreRefused) {
  const Files& f = TestFiles();
  auto mixed = testing::RecompressHdus(
      f.preproc, {{"IMAGE", {RICE_1, true, {}}}, {"IVAR", {GZIP_2, false, {}}}});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  absl::Status st = ReadAny(*mixed, false);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("quantized and lossless"), std::string::npos) << st;
  auto rice = testing::RecompressHdus(f.preproc, {{"IMAGE", {RICE_1, true, {}}}});
  ASSERT_TRUE(rice.ok());
  auto narrow = testing::WithHduCard(*rice, "IMAGE", "ZVAL2", "2");
  ASSERT_TRUE(narrow.ok());
  st = ReadAny(*narrow, false);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("for a float image"), std::string::npos) << st;
}

// A float tile CFITSIO cannot quantize (a constant one: no noise to scale against) is
// gzipped as it is into GZIP_COMPRESSED_DATA, in the type it was written from, and read
// back with the pixel size its inflated length gives. Read as doubles (as the readers read
// float images), a -64 image's tile of 4 bytes a pixel makes CFITSIO convert from a buffer
// it never allocated: a SIGSEGV, from a fuzzed file and from CFITSIO's own writing of a
// -64 image from floats. The check refuses such tiles; the images CFITSIO writes in their
// own type still read, and a -32 image written from doubles (8-byte tiles, which CFITSIO
// cannot read back) is refused by CFITSIO itself, cleanly.
TEST(CompressedHduCheckTest, UnquantizedFloatTilesHoldWhatCfitsioReadsAsDoubles) {
  struct Case {
    int bitpix, written_as;
    bool reads;        // the pixels come back
    bool layout_ok;    // the check passes it to CFITSIO
  };
  for (const Case c : {Case{FLOAT_IMG, TFLOAT, true, true}, Case{DOUBLE_IMG, TDOUBLE, true, true},
                       Case{FLOAT_IMG, TDOUBLE, false, true},
                       Case{DOUBLE_IMG, TFLOAT, false, false}}) {
    SCOPED_TRACE(::testing::Message() << c.bitpix << " from " << c.written_as);
    const std::string path = testing::MakeTempDir() + "/constant.fits";
    fitsfile* f = nullptr;
    int status = 0;
    fits_create_file(&f, path.c_str(), &status);
    fits_set_compression_type(f, GZIP_1, &status);
    long tile[2] = {10, 1};
    fits_set_tile_dim(f, 2, tile, &status);
    long naxes[2] = {10, 6};
    fits_create_img(f, c.bitpix, 2, naxes, &status);
    std::vector<double> pixels(60);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = 1.5 + static_cast<double>(i / 10);
    std::vector<float> floats(pixels.begin(), pixels.end());
    if (c.written_as == TDOUBLE) {
      fits_write_img(f, TDOUBLE, 1, 60, pixels.data(), &status);
    } else {
      fits_write_img(f, TFLOAT, 1, 60, floats.data(), &status);
    }
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
    const std::string bytes = testing::ReadBytes(path);
    ASSERT_NE(bytes.find("GZIP_COMPRESSED_DATA"), std::string::npos);
    const absl::Status layout = CheckFitsLayout(bytes.data(), bytes.size(), "constant.fits");
    if (!c.layout_ok) {
      EXPECT_EQ(layout.code(), absl::StatusCode::kInvalidArgument) << layout;
      EXPECT_NE(layout.message().find("is an unquantized float tile of 40 bytes for 10 pixels: "
                                      "CFITSIO reads 8 bytes a pixel of a ZBITPIX -64 image"),
                std::string::npos)
          << layout;
      continue;
    }
    ASSERT_TRUE(layout.ok()) << layout;
    auto file = FitsFile::OpenMemory(bytes.data(), bytes.size(), "constant.fits");
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE(file->MoveToHduIndex(1).ok());
    auto read = file->ReadImage<double>();
    if (c.reads) {
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(*read, pixels);
    } else {
      EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << read.status();
    }
  }
  const std::string crash = testing::ReadBytes(
      std::string(SPEXD_TEST_DATA_DIR) +
      "/../fuzz/regressions/compressed/unquantized-double-tile-of-float-size.fits");
  ASSERT_EQ(crash.size(), 17011u);
  const absl::Status st = CheckFitsLayout(crash.data(), crash.size(), "up.fits");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("[IVAR]: tile 1 of the compressed image is an unquantized float "
                              "tile of 20 bytes for 5 pixels: CFITSIO reads 8 bytes a pixel of "
                              "a ZBITPIX -64 image as doubles"),
            std::string::npos)
      << st;
}

TEST(CompressedHduCheckTest, CodecsDesiNeverWritesAreRefused) {
  const Files& f = TestFiles();
  for (int codec : {HCOMPRESS_1, PLIO_1}) {
    auto bytes = testing::RecompressHdus(f.preproc, {{"MASK", {codec, false, {}}}});
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::Status st = ReadAny(*bytes, false);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(codec == PLIO_1 ? "'PLIO_1'" : "'HCOMPRESS_1'"), std::string::npos)
        << st;
  }
}

// Every parameter CFITSIO reads, one bad value at a time, on a good RICE file.
TEST(CompressedHduCheckTest, EachBadParameterIsRefused) {
  const Files& f = TestFiles();
  auto rice = testing::RecompressHdus(
      f.preproc, {{"MASK", {RICE_1, false, {}}}, {"IMAGE", {RICE_1, true, {}}}});
  ASSERT_TRUE(rice.ok()) << rice.status();
  ASSERT_TRUE(CheckFitsLayout(rice->data(), rice->size(), "r.fits").ok());
  struct Case {
    std::string hdu, key, value, needle;
  };
  const std::vector<Case> cases = {
      {"MASK", "ZVAL1", "8", "must be 16 or 32"},
      {"MASK", "ZVAL1", "-32", "must be 16 or 32"},
      {"MASK", "ZVAL1", "32.5", "ZVAL1 must be an integer"},
      {"MASK", "ZVAL2", "3", "BYTEPIX (ZVAL2) must be 1, 2, 4 or 8"},
      {"MASK", "ZVAL2", "16", "ZVAL2 must be an integer in [1, 8]"},
      {"MASK", "ZNAME2", "'SMOOTH'", "ZNAME2 = 'BYTEPIX'"},
      {"MASK", "ZCMPTYPE", "'BZIP2_1'", "'BZIP2_1' is not accepted"},
      {"MASK", "ZCMPTYPE", "'NOCOMPRESS'", "not accepted"},
      {"MASK", "ZBITPIX", "12", "ZBITPIX = 12"},
      {"MASK", "ZNAXIS", "7", "ZNAXIS must be an integer in [1, 6]"},
      {"MASK", "ZNAXIS2", "100000", "tiles"},  // rows no longer one per tile
      {"MASK", "ZTILE1", "0", "ZTILE1 must be"},
      {"MASK", "ZNAXIS1", "0", "ZNAXIS1 must be"},
      {"IMAGE", "ZQUANTIZ", "'DITHER_3'", "ZQUANTIZ 'DITHER_3'"},
      {"IMAGE", "ZDITHER0", "0", "ZDITHER0 must be an integer in [1, 10000]"},
      {"IMAGE", "ZDITHER0", "10001", "ZDITHER0"},
      {"IMAGE", "ZDITHER0", "2147483647", "ZDITHER0"},  // overflows row + ZDITHER0 - 1
      {"IMAGE", "TFORM1", "'1PJ(40)'", "not a variable-length byte array"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key + " = " + c.value);
    auto bad = testing::WithHduCard(*rice, c.hdu, c.key, c.value);
    ASSERT_TRUE(bad.ok()) << bad.status();
    const absl::Status st = CheckFitsLayout(bad->data(), bad->size(), "r.fits");
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << st;
    EXPECT_NE(st.message().find("[" + c.hdu + "]"), std::string::npos) << st;
  }
  // The edges that are valid: ZDITHER0 1 and 10000, BLOCKSIZE 16 (CFITSIO decodes with it;
  // the stream is then a wrong one, so only the layout check is asked).
  for (const char* v : {"1", "10000"}) {
    auto ok = testing::WithHduCard(*rice, "IMAGE", "ZDITHER0", v);
    ASSERT_TRUE(ok.ok());
    EXPECT_TRUE(ReadAny(*ok, false).ok()) << v;
  }
}

// A keyword given twice: CFITSIO may read either card (it searches from where its last
// search ended), so the check cannot vouch for the value it reads.
TEST(CompressedHduCheckTest, RepeatedCompressionKeywordIsRefused) {
  const Files& f = TestFiles();
  auto rice = testing::RecompressHdus(f.preproc, {{"MASK", {RICE_1, false, {}}}});
  ASSERT_TRUE(rice.ok());
  // Rename the ZNAME2 card (after ZVAL1) into a second ZVAL1 of 0.
  std::string bytes = *rice;
  const std::size_t at = bytes.find("ZNAME2  = 'BYTEPIX");
  ASSERT_NE(at, std::string::npos);
  std::string card = "ZVAL1   = 0";
  card.resize(80, ' ');
  bytes.replace(at, 80, card);
  const absl::Status st = CheckFitsLayout(bytes.data(), bytes.size(), "r.fits");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("ZVAL1 appears more than once"), std::string::npos) << st;
}

// A RICE tile whose bytes are corrupt: CFITSIO checks the stream's end only after each
// block, so it would read past the tile first (its leading-zero loop reads on until it
// meets a non-zero byte).
TEST(CompressedHduCheckTest, CorruptRiceTileIsRefused) {
  const Files& f = TestFiles();
  auto rice = testing::RecompressHdus(f.preproc, {{"MASK", {RICE_1, false, {}}}});
  ASSERT_TRUE(rice.ok());
  auto tile = testing::FirstTile(*rice, "MASK");
  ASSERT_TRUE(tile.ok()) << tile.status();
  ASSERT_GT(tile->second, 3);
  std::string bytes = *rice;
  // Keep the first value (2 bytes for 16-bit BYTEPIX); then a block header that selects
  // Rice codes with no low bits (4 bits 0001: fs = 0), and zeros: each value's unary part
  // never ends (zeros alone would be valid: blocks of repeated values).
  for (long long i = 2; i < tile->second; ++i) bytes[static_cast<std::size_t>(tile->first + i)] = 0;
  bytes[static_cast<std::size_t>(tile->first + 2)] = 0x10;
  const absl::Status st = CheckFitsLayout(bytes.data(), bytes.size(), "r.fits");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("RICE_1 stream"), std::string::npos) << st;
  EXPECT_NE(st.message().find("tile 1"), std::string::npos) << st;
}

// The walk accepts what CFITSIO's encoder writes, refuses every cut of it, and whatever it
// accepts CFITSIO decodes without reading past the stream: the stream ends at a page that
// cannot be read, so a read past it would fault.
TEST(RiceStreamCheckTest, AgreesWithCfitsiosDecoderAndBoundsItsReads) {
  const long page = sysconf(_SC_PAGESIZE);
  const std::size_t span = static_cast<std::size_t>(page) * 64;
  char* mem = static_cast<char*>(
      mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(mem + span, page, PROT_NONE), 0);
  std::mt19937 rng(5);
  std::vector<unsigned short> out(4096);
  int accepted_mutants = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 3000);
    const int blocksize = trial % 2 ? 16 : 32;
    std::vector<short> values(static_cast<std::size_t>(n));
    const int spread = trial % 5 == 0 ? 0 : 1 << (trial % 16);
    for (short& v : values) v = static_cast<short>(spread ? rng() % spread : 7);
    std::vector<unsigned char> c(static_cast<std::size_t>(n) * 3 + 64);
    const int len = fits_rcomp_short(values.data(), n, c.data(), static_cast<int>(c.size()), blocksize);
    ASSERT_GT(len, 0);
    std::string stream(reinterpret_cast<char*>(c.data()), static_cast<std::size_t>(len));
    EXPECT_TRUE(internal::CheckRiceStream(stream, n, blocksize, 2).ok()) << trial;
    if (stream.size() > 8) {
      EXPECT_FALSE(internal::CheckRiceStream(stream.substr(0, stream.size() / 2), n, blocksize, 2)
                       .ok()) << trial;
    }
    EXPECT_FALSE(internal::CheckRiceStream(stream.substr(0, 2), n, blocksize, 2).ok());
    // Mutants: where the walk accepts, CFITSIO must decode inside the stream.
    for (int m = 0; m < 20; ++m) {
      std::string mutant = stream;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        mutant[rng() % mutant.size()] = static_cast<char>(rng() % 4 == 0 ? 0 : rng());
      }
      if (rng() % 3 == 0) mutant.resize(1 + rng() % mutant.size());
      if (!internal::CheckRiceStream(mutant, n, blocksize, 2).ok()) continue;
      ++accepted_mutants;
      char* at = mem + span - mutant.size();
      std::memcpy(at, mutant.data(), mutant.size());
      EXPECT_EQ(fits_rdecomp_short(reinterpret_cast<unsigned char*>(at),
                                   static_cast<int>(mutant.size()), out.data(), n, blocksize),
                0);
    }
  }
  EXPECT_GT(accepted_mutants, 100);  // the guarded decode ran often
  munmap(mem, span + page);
}

}  // namespace
}  // namespace spexd::core
