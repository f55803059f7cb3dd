// gzip in and out of the FITS layer: streaming inflation with its corrupt/truncated
// errors, FITS files inflated with the size limits checked from each header (gzip
// bombs), preproc and PSF readers taking .fits.gz, and .gz outputs.
#include <fitsio.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"
#include "core/frame/frame_writer.h"
#include "core/io/internal/gzip.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using gzip_test::FitsImageHeader;
using gzip_test::Gzip;
using gzip_test::NoiseBytes;

absl::StatusOr<std::string> Inflate(const std::string& gz, std::size_t piece = 1000) {
  std::string out;
  GzipInflater inflater("t.gz", [&](absl::string_view p) {
    out.append(p.data(), p.size());
    return absl::OkStatus();
  });
  for (std::size_t off = 0; off < gz.size(); off += piece) {
    absl::Status st = inflater.Feed(absl::string_view(gz).substr(off, piece));
    if (!st.ok()) return st;
  }
  absl::Status st = inflater.Finish();
  if (!st.ok()) return st;
  return out;
}


// A small preproc file (IMAGE, IVAR float32, MASK int32 with `mask_value` at pixel 3),
// optionally with IMAGE tile-compressed.
std::string PreprocBytes(long width, long height, int32_t mask_value = 0,
                         bool compressed_image = false) {
  // On disk: CFITSIO's tile compression does not write into a memory file.
  const std::string path = testing::MakeTempDir() + "/p.fits";
  auto f = FitsFile::Create(path);
  EXPECT_TRUE(f.ok());
  const std::size_t n = static_cast<std::size_t>(width * height);
  std::vector<float> image(n), ivar(n, 2.0f);
  for (std::size_t i = 0; i < n; ++i) image[i] = static_cast<float>(i % 97) * 0.5f;
  std::vector<int32_t> mask(n, 0);
  mask[3] = mask_value;
  int status = 0;
  if (compressed_image) {
    fits_create_img(f->get(), BYTE_IMG, 0, nullptr, &status);
    fits_set_compression_type(f->get(), RICE_1, &status);
  }
  {
    auto st = f->WriteImage<float>("IMAGE", {width, height}, image.data());
    EXPECT_TRUE(st.ok()) << st;
  }
  if (compressed_image) fits_set_compression_type(f->get(), 0, &status);  // 0: none
  EXPECT_EQ(status, 0);
  { auto st = f->WriteImage<float>("IVAR", {width, height}, ivar.data()); EXPECT_TRUE(st.ok()) << st; }
  EXPECT_TRUE(f->WriteImage<int32_t>("MASK", {width, height}, mask.data()).ok());
  EXPECT_TRUE(f->Close().ok());
  return testing::ReadBytes(path);
}

// A FITS header block (plus padding) whose primary HDU declares a `width` x `height`

TEST(Gzip, RecognisedByMagicBytes) {
  EXPECT_TRUE(IsGzip(std::string("\x1f\x8b\x08", 3)));
  EXPECT_FALSE(IsGzip("SIMPLE  ="));
  EXPECT_FALSE(IsGzip(std::string("\x1f", 1)));
  EXPECT_FALSE(IsGzip(""));
}

TEST(Gzip, RoundTripInPiecesOfAnySize) {
  const std::string data = NoiseBytes(3 << 20, 7);
  const std::string gz = Gzip(data);
  EXPECT_TRUE(IsGzip(gz));
  EXPECT_LT(gz.size(), data.size());
  for (std::size_t piece : {std::size_t{1} << 30, std::size_t{4096}, std::size_t{7}}) {
    if (piece == 7) {  // byte-sized pieces over a short stream only (slow otherwise)
      const std::string small = data.substr(0, 20000);
      auto out = Inflate(Gzip(small), piece);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(*out, small);
      continue;
    }
    auto out = Inflate(gz, piece);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, data);
  }
}

TEST(Gzip, ConcatenatedMembersAndNulPaddingAsGzipDoes) {
  const std::string a = NoiseBytes(5000, 1), b = NoiseBytes(7000, 2);
  auto out = Inflate(Gzip(a) + Gzip(b) + std::string(100, '\0'));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, a + b);
  auto junk = Inflate(Gzip(a) + std::string(4, '\0') + "junk");
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument) << junk.status();
  for (std::size_t piece : {std::size_t{1}, std::size_t{1} << 20}) {
    auto garbage = Inflate(Gzip(a) + "garbage\n", piece);
    EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument) << garbage.status();
    EXPECT_NE(garbage.status().message().find("not a gzip member"), std::string::npos)
        << garbage.status() << " piece " << piece;
  }
}

TEST(Gzip, CorruptAndTruncatedStreamsAreInvalidArgument) {
  const std::string gz = Gzip(NoiseBytes(200000, 3));
  std::string corrupt = gz;
  for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) corrupt[i] ^= 0x5A;
  auto bad = Inflate(corrupt);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("corrupt gzip"), std::string::npos) << bad.status();
  std::string crc = gz;
  crc[crc.size() - 6] ^= 1;  // the CRC-32 of the trailer
  auto bad_crc = Inflate(crc);
  EXPECT_EQ(bad_crc.status().code(), absl::StatusCode::kInvalidArgument) << bad_crc.status();
  for (std::size_t cut : {gz.size() / 2, gz.size() - 4, std::size_t{5}}) {
    auto cut_out = Inflate(gz.substr(0, cut));
    EXPECT_EQ(cut_out.status().code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_NE(cut_out.status().message().find("truncated gzip"), std::string::npos)
        << cut_out.status();
  }
}

TEST(GunzipFits, ReturnsTheFitsFileAndDropsBytesAfterTheLastHdu) {
  const std::string fits = PreprocBytes(40, 30);
  auto out = GunzipFits(Gzip(fits + std::string(5000, '\0')), "p.fits.gz", FitsSizeLimits{});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, fits);
  auto not_fits = GunzipFits(Gzip(std::string(6000, 'x')), "x.gz", FitsSizeLimits{});
  EXPECT_EQ(not_fits.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_fits.status().message().find("not a FITS file"), std::string::npos)
      << not_fits.status();
  auto cut = GunzipFits(Gzip(fits.substr(0, fits.size() - 2880)), "c.gz", FitsSizeLimits{});
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument) << cut.status();
  // What CFITSIO accepts in a plain file: a last block without its padding, a partial
  // block of junk after the last HDU.
  auto short_pad = GunzipFits(Gzip(fits.substr(0, fits.size() - 900)), "s.gz", FitsSizeLimits{});
  ASSERT_TRUE(short_pad.ok()) << short_pad.status();
  EXPECT_EQ(*short_pad, fits.substr(0, fits.size() - 900));
  auto junk = GunzipFits(Gzip(fits + "junk"), "j.gz", FitsSizeLimits{});
  ASSERT_TRUE(junk.ok()) << junk.status();
  EXPECT_EQ(*junk, fits);
}

TEST(GunzipFits, BombIsRefusedFromItsHeaderBeforeItsDataInflate) {
  // A 40 GB image declared in the first 2880 bytes, then 16 MB of zeros whose end is
  // corrupt: refused as too large (RESOURCE_EXHAUSTED), not reported as corrupt, so
  // inflation stopped long before the corrupt part.
  std::string gz = Gzip(FitsImageHeader(100000, 100000) + std::string(16 << 20, '\0'));
  ASSERT_LT(gz.size(), 100000u);
  for (std::size_t i = gz.size() - 200; i < gz.size() - 100; ++i) gz[i] ^= 0x33;
  auto out = GunzipFits(gz, "bomb.fits.gz", FitsSizeLimits{});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_NE(out.status().message().find("refused from its header"), std::string::npos)
      << out.status();
  // Under the pixel limit but over the byte limit: refused from the header too.
  FitsSizeLimits small{.max_file_bytes = 1 << 20, .max_image_pixels = int64_t{1} << 28};
  auto big = GunzipFits(Gzip(FitsImageHeader(1000, 1000)), "big.fits.gz", small);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_NE(big.status().message().find("declare more than"), std::string::npos) << big.status();
}

TEST(GunzipFits, InflatedBytesAreBoundedEvenAfterTheLastHdu) {
  const std::string fits = PreprocBytes(20, 20);
  FitsSizeLimits limits{.max_file_bytes = 4 << 20, .max_image_pixels = 1 << 20};
  auto out = GunzipFits(Gzip(fits + std::string(16 << 20, '\0')), "tail.fits.gz", limits);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_NE(out.status().message().find("inflates to more than"), std::string::npos)
      << out.status();
}

TEST(GunzipFits, TileCompressedImageIsJudgedByItsZnaxis) {
  const std::string fits = PreprocBytes(300, 200, 0, /*compressed_image=*/true);
  auto ok = GunzipFits(Gzip(fits), "z.fits.gz", FitsSizeLimits{});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, fits);
  FitsSizeLimits limits{.max_file_bytes = 1 << 30, .max_image_pixels = 50000};
  auto refused = GunzipFits(Gzip(fits), "z.fits.gz", limits);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
}

TEST(GunzipFits, StopCallbackCancels) {
  const std::string gz = Gzip(FitsImageHeader(4000, 4000) + std::string(20 << 20, '\0'));
  int polls = 0;
  auto out = GunzipFits(gz, "s.fits.gz", FitsSizeLimits{}, [&] { return ++polls >= 2; });
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(polls, 2);
}

TEST(PreprocGzip, GzipBytesAndFilesReadLikeThePlainFile) {
  const std::string fits = PreprocBytes(40, 30, 4);
  const std::string gz = Gzip(fits);
  auto plain = ReadPreprocFromMemory(fits.data(), fits.size(), "p.fits", {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto from_gz = ReadPreprocFromMemory(gz.data(), gz.size(), "p.fits.gz", {});
  ASSERT_TRUE(from_gz.ok()) << from_gz.status();
  EXPECT_EQ(from_gz->image, plain->image);
  EXPECT_EQ(from_gz->ivar, plain->ivar);
  EXPECT_EQ(from_gz->n_masked, 1u);
  // On disk, under any name: recognised by content.
  const std::string dir = testing::MakeTempDir();
  testing::WriteBytes(dir + "/p.fits.gz", gz);
  testing::WriteBytes(dir + "/renamed.fits", gz);
  for (const char* name : {"/p.fits.gz", "/renamed.fits"}) {
    auto from_file = ReadPreproc(dir + name, {});
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    EXPECT_EQ(from_file->image, plain->image);
    EXPECT_EQ(from_file->ivar, plain->ivar);
  }
  // A gzip bomb on disk is refused like an uploaded one.
  testing::WriteBytes(dir + "/bomb.fits.gz", Gzip(FitsImageHeader(100000, 100000) + std::string(1 << 20, '\0')));
  EXPECT_EQ(ReadPreproc(dir + "/bomb.fits.gz", {}).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(PreprocLimits, EveryPlaneIsCheckedFromItsHeaderBeforeDecoding) {
  // A tile-compressed IMAGE over the pixel limit is refused from its header, before its
  // tiles are decoded.
  std::string fits = PreprocBytes(300, 200, 0, /*compressed_image=*/true);
  FitsSizeLimits small;
  small.max_image_pixels = 50000;
  auto refused = PreprocReader::OpenMemory(fits, "z.fits", {}, small);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("refused before decoding"), std::string::npos)
      << refused.status();
  auto reader = PreprocReader::OpenMemory(fits, "z.fits", {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->height(), 200);
  EXPECT_EQ(reader->width(), 300);
  EXPECT_TRUE(reader->Read().ok());
  // Garbage tiles: their gzip streams are checked when the file is opened (fits_layout.h:
  // CFITSIO loops for ever on a cut gzip tile), so the file is refused there, naming the tile.
  auto f = FitsFile::OpenMemory(fits.data(), fits.size(), "z");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->MoveToHdu("IMAGE").ok());
  LONGLONG head = 0, data = 0, end = 0;
  int status = 0;
  fits_get_hduaddrll(f->get(), &head, &data, &end, &status);
  ASSERT_EQ(status, 0);
  for (LONGLONG i = data + (end - data) / 2; i < end - 100; ++i) fits[i] = static_cast<char>(0xA5);
  auto garbage = PreprocReader::OpenMemory(fits, "z.fits", {});
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument) << garbage.status();
  EXPECT_NE(garbage.status().message().find("z.fits[IMAGE]: tile "), std::string::npos)
      << garbage.status();
}

TEST(PreprocLimits, StopIsHonouredBeforeDecoding) {
  const std::string fits = PreprocBytes(40, 30);
  auto reader = PreprocReader::OpenMemory(fits, "p.fits", {}, {}, [] { return true; });
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->Read().status().code(), absl::StatusCode::kCancelled);
}

TEST(PsfGzip, GzipPsfLoadsLikeThePlainOne) {
  const std::string bytes = testing::ReadBytes(testing::BundledPsfPath());
  const std::string gz = Gzip(bytes);
  auto plain = Psf::LoadFromMemory(bytes.data(), bytes.size(), "psf.fits");
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto from_gz = Psf::LoadFromMemory(gz.data(), gz.size(), "psf.fits.gz");
  ASSERT_TRUE(from_gz.ok()) << from_gz.status();
  EXPECT_EQ(from_gz->nspec(), plain->nspec());
  EXPECT_EQ(from_gz->xtrace().coeff, plain->xtrace().coeff);
  EXPECT_EQ(from_gz->param_table(Psf::kGhSigX).coeff, plain->param_table(Psf::kGhSigX).coeff);
  auto cut = Psf::LoadFromMemory(gz.data(), gz.size() / 2, "psf.fits.gz");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument) << cut.status();
}

TEST(FitsOutput, GzNamesGetGzipWithTheSameHdusAndValidChecksums) {
  const std::string fits = PreprocBytes(40, 30);
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(WriteFitsAtomically(dir + "/plain.fits", fits).ok());
  ASSERT_TRUE(WriteFitsAtomically(dir + "/packed.fits.gz", fits).ok());
  EXPECT_EQ(testing::ReadBytes(dir + "/plain.fits"), fits);
  const std::string gz = testing::ReadBytes(dir + "/packed.fits.gz");
  ASSERT_TRUE(IsGzip(gz));
  auto inflated = Inflate(gz);
  ASSERT_TRUE(inflated.ok());
  EXPECT_EQ(*inflated, fits);
  // CFITSIO reads it by name like any .fits.gz.
  auto f = FitsFile::OpenRead(dir + "/packed.fits.gz");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->MoveToHdu("IVAR").ok());
  auto ivar = f->ReadImage<float>();
  ASSERT_TRUE(ivar.ok());
  EXPECT_EQ(*ivar, std::vector<float>(40 * 30, 2.0f));
  // No temporary file left beside the output.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
}

}  // namespace
}  // namespace spexd::core
