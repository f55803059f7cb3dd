#include "core/io/internal/fits_layout.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <cstdint>
#include <vector>
#include <cstring>

#include "core/io/fits_file.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

// The value field (columns 11-80) of the first card named `key` replaced by `value`.
std::string WithCard(std::string bytes, const std::string& key, const std::string& value) {
  std::string name = key;
  name.resize(8, ' ');
  name += "= ";
  for (std::size_t at = 0; at + 80 <= bytes.size(); at += 80) {
    if (bytes.compare(at, 10, name) == 0) {
      std::string field = value;
      field.resize(70, ' ');
      bytes.replace(at + 10, 70, field);
      return bytes;
    }
  }
  ADD_FAILURE() << "no card " << key;
  return bytes;
}

void ExpectRefused(const std::string& bytes, const std::string& needle) {
  absl::Status st = CheckFitsLayout(bytes.data(), bytes.size(), "t.fits");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find(needle), std::string::npos) << st;
  // FitsFile refuses it before CFITSIO parses it.
  auto file = FitsFile::OpenMemory(bytes.data(), bytes.size(), "t.fits");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  // The overload that takes the bytes (uploads and decompressed .gz files).
  auto owned = FitsFile::OpenMemory(std::string(bytes), "t.fits");
  EXPECT_EQ(owned.status().code(), absl::StatusCode::kInvalidArgument) << owned.status();
  EXPECT_NE(owned.status().message().find(needle), std::string::npos) << owned.status();
}

class FitsLayoutTest : public ::testing::Test {
 protected:
  // The bundled PSF: a primary HDU, two images and a binary table (1 MB).
  const std::string psf_ = testing::ReadBytes(testing::BundledPsfPath());
};

TEST_F(FitsLayoutTest, AcceptsTheTestData) {
  EXPECT_TRUE(CheckFitsLayout(psf_.data(), psf_.size(), "psf.fits").ok());
  // Without the last HDU's padding (CFITSIO accepts it; so does the check).
  const std::string unpadded = psf_.substr(0, psf_.size() - 100);
  EXPECT_EQ(psf_.substr(psf_.size() - 100), std::string(100, '\0'));
  EXPECT_TRUE(CheckFitsLayout(unpadded.data(), unpadded.size(), "psf.fits").ok());
  // A partial junk record after the last HDU is ignored, as CFITSIO does.
  const std::string junk = psf_ + std::string(1000, 'x');
  EXPECT_TRUE(CheckFitsLayout(junk.data(), junk.size(), "psf.fits").ok());
}

// Found by fuzzing the PSF reader: a mutated NAXIS1 ("(          80") made CFITSIO
// calloc about 15 PB while moving to the table's HDU (an ASan allocation-size-too-big;
// without ASan a failed or, for other values, a real giant allocation).
TEST_F(FitsLayoutTest, FuzzedPsfWithBrokenNaxis1IsRefusedBeforeCfitsio) {
  const std::string path =
      std::string(SPEXD_TEST_DATA_DIR) + "/../fuzz/regressions/psf/huge-calloc-in-cfitsio.fits";
  const std::string bytes = testing::ReadBytes(path);
  ASSERT_EQ(bytes.size(), 25920u);
  auto mem = Psf::LoadFromMemory(bytes.data(), bytes.size(), "upload.fits");
  EXPECT_EQ(mem.status().code(), absl::StatusCode::kInvalidArgument) << mem.status();
  // The primary header holds non-ASCII bytes (the mutation's other change): the first fault.
  EXPECT_NE(mem.status().message().find("upload.fits[HDU 0]: header byte 2583 is not printable"),
            std::string::npos)
      << mem.status();
  auto disk = Psf::Load(path);
  EXPECT_EQ(disk.status().code(), absl::StatusCode::kInvalidArgument) << disk.status();
  // Its table's NAXIS1 alone, on the seed it was mutated from, is refused too.
  std::string seed = testing::ReadBytes(std::string(SPEXD_TEST_DATA_DIR) +
                                        "/../fuzz/corpus/psf/psf-r0-2fibres.fits");
  const std::size_t table = seed.find("XTENSION= 'BINTABLE'");
  ASSERT_NE(table, std::string::npos);
  const std::size_t naxis1 = seed.find("NAXIS1  = ", table);
  ASSERT_NE(naxis1, std::string::npos);
  seed.replace(naxis1 + 10, 20, "       (          80");
  ExpectRefused(seed, "[PSF]: keyword NAXIS1 must be an integer");
}

// Found by fuzzing the PSF reader: a file cut 2,665 bytes into a record that begins with
// an XTENSION card. The padded copy that CFITSIO reads made that record a header whose
// binary garbage CFITSIO parsed, leaving its column count uninitialised: a calloc of
// petabytes that depended on what was on the stack (no crash when replayed alone).
TEST_F(FitsLayoutTest, CutExtensionHeaderAfterTheLastHduIsRefused) {
  const std::string path = std::string(SPEXD_TEST_DATA_DIR) +
                           "/../fuzz/regressions/psf/cut-extension-header-after-last-hdu.fits";
  const std::string bytes = testing::ReadBytes(path);
  ASSERT_EQ(bytes.size(), 14185u);
  auto mem = Psf::LoadFromMemory(bytes.data(), bytes.size(), "upload.fits");
  EXPECT_EQ(mem.status().code(), absl::StatusCode::kInvalidArgument) << mem.status();
  EXPECT_NE(mem.status().message().find("upload.fits[HDU 2]: truncated file: the header starting "
                                        "at byte 11520 has no END card"),
            std::string::npos)
      << mem.status();
  // The same on a file that is fine up to a cut extension header of 100 bytes.
  const std::string cut = psf_ + psf_.substr(63360, 100);
  ASSERT_EQ(cut.compare(psf_.size(), 8, "XTENSION"), 0);
  ExpectRefused(cut, "truncated file: the header starting at byte 1025280 has no END card");
}

// Found by fuzzing the preproc reader: a 20 KB file whose GZIP_1-compressed MASK holds a
// cut gzip stream. CFITSIO 4.2.0 loops for ever on it, growing its buffer (more than 60 s
// without ASan before the check; a loader thread held without end in the server).
TEST_F(FitsLayoutTest, TruncatedGzipTileIsRefusedBeforeCfitsioLoopsOnIt) {
  const std::string fuzz = std::string(SPEXD_TEST_DATA_DIR) + "/../fuzz/";
  const std::string bad = testing::ReadBytes(fuzz + "regressions/preproc/endless-gzip-tile-in-cfitsio.fits");
  ASSERT_EQ(bad.size(), 20161u);
  auto r = ReadPreprocFromMemory(bad.data(), bad.size(), "upload.fits", {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("upload.fits[MASK]: tile "), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("is not a whole gzip stream"), std::string::npos)
      << r.status();
  // The seed it was mutated from, a valid GZIP_1-compressed MASK, still reads.
  const std::string good = testing::ReadBytes(fuzz + "corpus/preproc/preproc-f64-compressed-mask.fits");
  auto ok = ReadPreprocFromMemory(good.data(), good.size(), "seed.fits", {});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// Found by the CI fuzz stage on the PSF reader: LEGDEG = "(       3". CFITSIO's integer
// conversion overflowed its message buffer on it (a fortify abort: the process died).
TEST_F(FitsLayoutTest, MalformedNumericKeywordIsRefusedBeforeCfitsioConvertsIt) {
  const std::string bytes = testing::ReadBytes(std::string(SPEXD_TEST_DATA_DIR) +
                                               "/../fuzz/regressions/psf/fortify-abort-in-ffc2j.fits");
  ASSERT_EQ(bytes.size(), 25920u);
  auto psf = Psf::LoadFromMemory(bytes.data(), bytes.size(), "upload.fits");
  EXPECT_EQ(psf.status().code(), absl::StatusCode::kInvalidArgument) << psf.status();
  EXPECT_NE(psf.status().message().find("upload.fits[PSF]: keyword LEGDEG is not an integer"),
            std::string::npos)
      << psf.status();
}

// Found by fuzzing the tile-compressed readers: a primary header whose END card was lost
// ran on through an extension's cards, PCOUNT = 79 among them. CFITSIO sizes a primary
// array (and any extension it reads as an image) with the PCOUNT and GCOUNT found anywhere
// in the header, the last winning, so it found a second HDU where this walk, taking no
// PCOUNT for a primary, found none: a compressed table whose data lay past the input,
// which CFITSIO's memory driver then read (ASan heap-buffer-overflow).
TEST_F(FitsLayoutTest, ImageDataAreSizedWithPcountAndGcountAsCfitsioSizesThem) {
  const std::string path = std::string(SPEXD_TEST_DATA_DIR) +
                           "/../fuzz/regressions/compressed/primary-pcount-leads-cfitsio-past-the-input.fits";
  const std::string bytes = testing::ReadBytes(path);
  ASSERT_EQ(bytes.size(), 16852u);
  ExpectRefused(bytes, "[HDU 1]: truncated file: the header starting at byte 11520 has no END");
  // The rule on the bundled PSF, whose primary array is XTRACE (7 x 500 float64): PCOUNT
  // cards put in its header add to its data unit, the last one counting, (5760 + 3500) x 8
  // bytes; the walk and CFITSIO then agree that no extension follows where the data end.
  const std::size_t end = psf_.find("END     ");
  ASSERT_LT(end + 240, std::size_t{2880});
  ASSERT_EQ(psf_.substr(end + 80, 160), std::string(160, ' '));
  const auto card = [](const std::string& key, const std::string& value) {
    std::string c = key;
    c.resize(8, ' ');
    c += "= " + std::string(20 - value.size(), ' ') + value;
    c.resize(80, ' ');
    return c;
  };
  std::string with = psf_;
  with.replace(end, 240, card("PCOUNT", "10") + card("PCOUNT", "5760") + "END" + std::string(77, ' '));
  std::vector<FitsHduSpan> spans;
  const auto read = [&](std::int64_t offset, std::size_t n, char* out) {
    if (offset < 0 || offset + static_cast<std::int64_t>(n) > static_cast<std::int64_t>(with.size())) return false;
    std::memcpy(out, with.data() + offset, n);
    return true;
  };
  ASSERT_TRUE(CheckFitsLayout(read, static_cast<std::int64_t>(with.size()), "p.fits", &spans).ok());
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].data_bytes, (5760 + 7 * 500) * 8);
  auto file = FitsFile::OpenMemory(with.data(), with.size(), "p.fits");
  ASSERT_TRUE(file.ok()) << file.status();
  auto n = file->NumHdus();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
}

// Found by fuzzing the tile-compressed readers: a table whose ZIMAGE card read "ZIMAGE $= T".
// CFITSIO names a card by its characters up to a blank or '=', so it took the table for a
// compressed image; this walk, reading the standard's name field, saw none, never checked
// its tiles, and CFITSIO allocated 4 GB for one. Cards that CFITSIO would read otherwise
// than the standard says are refused when their name matters; other malformed cards pass.
TEST_F(FitsLayoutTest, CardsCfitsioWouldReadOtherwiseAreRefusedWhenTheyMatter) {
  const std::string path = std::string(SPEXD_TEST_DATA_DIR) +
                           "/../fuzz/regressions/compressed/zimage-name-with-junk-hides-a-compressed-table.fits";
  const std::string bytes = testing::ReadBytes(path);
  ASSERT_EQ(bytes.size(), 25178u);
  ExpectRefused(bytes, "('ZIMAGE $=                    T') is malformed: its name field holds "
                       "more than a name (CFITSIO would read it as ZIMAGE)");
  // On the bundled PSF, one card of its primary header (a COMMENT at byte 480) replaced.
  const auto with_card = [&](const std::string& card) {
    std::string c = card;
    c.resize(80, ' ');
    std::string b = psf_;
    EXPECT_EQ(b.compare(480, 7, "COMMENT"), 0);
    b.replace(480, 80, c);
    return b;
  };
  ExpectRefused(with_card("HIERARCH ZIMAGE = T"),
                "a HIERARCH card gives a structural keyword (CFITSIO would read it as ZIMAGE)");
  ExpectRefused(with_card("GCOUNT=5"), "its name field holds more than a name");
  ExpectRefused(with_card("PCOUNT    =                 77"),
                "its value indicator is not in columns 9-10 (CFITSIO would read it as PCOUNT)");
  for (const std::string& harmless :
       {std::string("FOO $=                        1"), std::string("HIERARCH ESO DET CHIP = 1"),
        std::string("HIERARCH TELESCOPE = 'Mayall'"), std::string("HISTORY a=b, c = d"),
        std::string("OBSERVER   = 'x'")}) {
    const std::string b = with_card(harmless);
    EXPECT_TRUE(CheckFitsLayout(b.data(), b.size(), "p.fits").ok()) << harmless;
  }
}

TEST_F(FitsLayoutTest, RefusesSizesBeyondTheBytesGiven) {
  // A table announcing more rows than the file holds: refused before any read.
  ExpectRefused(WithCard(psf_, "NAXIS2", "1000000"), "truncated file");
  // Integers whose product passes any size (saturated, never overflowing): the same words.
  ExpectRefused(WithCard(psf_, "NAXIS2", "999999999999999999"),
                "truncated file: the HDU announces more data than");
  ExpectRefused(WithCard(psf_, "PCOUNT", "1000000000"),
                "truncated file: the HDU announces more data than");
  ExpectRefused(WithCard(psf_, "GCOUNT", "100"), "truncated file");
  // Column counts and widths: TFIELDS above the standard's 999; repeat counts that do not
  // add up to the row length.
  ExpectRefused(WithCard(psf_, "TFIELDS", "1000"), "TFIELDS must be an integer in [0, 999]");
  ExpectRefused(WithCard(psf_, "TFORM2", "'9999999999999D'"), "TFORM2 announces more than");
  ExpectRefused(WithCard(psf_, "TFORM2", "'1D'"), "the TFORMn widths add up to");
  ExpectRefused(WithCard(psf_, "TFORM2", "'1Z'"), "unknown data type");
  ExpectRefused(WithCard(psf_, "BITPIX", "-16"), "BITPIX = -16 is not one of");
  ExpectRefused(WithCard(psf_, "NAXIS", "1000"), "NAXIS must be an integer in [0, 999]");
  ExpectRefused(WithCard(psf_, "NAXIS1", "-3"), "NAXIS1 must be an integer");
}

TEST_F(FitsLayoutTest, RefusesBrokenHeaders) {
  std::string no_end = psf_.substr(0, 2880);
  no_end.replace(no_end.find("END     "), 8, "COMMENT ");
  ExpectRefused(no_end, "truncated file: the header starting at byte 0 has no END card");
  std::string binary = psf_;
  binary[200] = '\x01';
  ExpectRefused(binary, "header byte 200 is not printable ASCII");
  std::string not_fits = psf_;
  not_fits.replace(0, 6, "SIMPLY");
  ExpectRefused(not_fits, "cannot open as FITS: the file does not start with a SIMPLE card");
}

TEST_F(FitsLayoutTest, DiskFilesAreCheckedToo) {
  const std::string path = ::testing::TempDir() + "/layout-" + std::to_string(getpid()) + ".fits";
  const std::string bad = WithCard(psf_, "TFIELDS", "1000");
  std::ofstream(path, std::ios::binary).write(bad.data(), static_cast<std::streamsize>(bad.size()));
  auto file = FitsFile::OpenRead(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_NE(file.status().message().find("TFIELDS must be an integer"), std::string::npos)
      << file.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace spexd::core
