// What a hostile FITS header may cost a reader: a primary header whose END never comes
// (COMMENT cards, or the text "SIMPLE  = " over and over), and a well-formed preproc
// .fits.gz that cannot be one (two float64 planes of zeros, the primary and IVAR, no
// IMAGE; or planes whose shapes disagree). Each is refused from its headers, by upload
// (in memory) and by path, with the peak extra resident memory of the refusal measured:
// a few MB, where reading or inflating the file whole cost its gigabyte.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/io/internal/gzip.h"
#include "core/io/fits_gunzip.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"
#include "tests/peak_memory.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

constexpr int64_t kFewMegabytes = int64_t{8} << 20;

using gzip_test::FitsCard;
using gzip_test::FitsIntCard;
using gzip_test::Float64PlaneHeader;
using gzip_test::PaddedDataBytes;
using gzip_test::PaddedHeader;

// Refused by upload (PreprocReader::OpenMemory) and by path (PreprocReader::Open), with
// `code` and `message`, adding at most kFewMegabytes of resident memory beyond the input.
void ExpectPreprocRefusedCheaply(const std::string& gz, absl::StatusCode code,
                                 const std::string& message) {
  const std::string path = testing::MakeTempDir() + "/hostile.fits.gz";
  ASSERT_TRUE(testing::WriteBytes(path, gz));
  for (bool by_path : {false, true}) {
    SCOPED_TRACE(by_path ? "by path" : "uploaded");
    std::string upload = by_path ? std::string() : gz;
    absl::Status status;
    const int64_t extra = testing::PeakExtraResident([&] {
      status = by_path ? PreprocReader::Open(path, {}).status()
                       : PreprocReader::OpenMemory(std::move(upload), "upload", {}).status();
    });
    std::printf("%s, %zu bytes: peak extra resident %lld bytes: %s\n",
                by_path ? "by path" : "uploaded", gz.size(), static_cast<long long>(extra),
                status.ToString().c_str());
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_NE(status.message().find(message), std::string::npos) << status;
    if (extra >= 0) {
      EXPECT_LT(extra, kFewMegabytes) << "peak extra resident bytes";
    }
  }
}

TEST(HostileHeaders, HeaderWithoutEndIsRefusedAfterTheLongestHeaderAllowed) {
  const std::string fits = gzip_test::CommentBombFits(std::size_t{64} << 20);
  const std::string gz = gzip_test::Gzip(fits);
  ASSERT_LT(gz.size(), std::size_t{4} << 20);
  ExpectPreprocRefusedCheaply(gz, absl::StatusCode::kInvalidArgument,
                              "no END card in its first 2880 cards");
  // The same words for the plain file, uploaded (its first MiB: the walk stops at the limit).
  auto plain = PreprocReader::OpenMemory(fits.substr(0, 1 << 20), "plain.fits", {});
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kInvalidArgument) << plain.status();
  EXPECT_NE(plain.status().message().find("no END card in its first 2880 cards"),
            std::string::npos) << plain.status();
}

TEST(HostileHeaders, RepeatedSimpleIsRefusedAfterTheLongestHeaderAllowed) {
  const std::string fits = gzip_test::RepeatedSimpleFits(std::size_t{64} << 20);
  ExpectPreprocRefusedCheaply(gzip_test::Gzip(fits), absl::StatusCode::kInvalidArgument,
                              "no END card in its first 2880 cards");
}

// A header of exactly the longest length allowed is read.
TEST(HostileHeaders, TheLongestHeaderAllowedIsRead) {
  std::string h = FitsCard("SIMPLE  =                    T") + FitsIntCard("BITPIX", 8) +
                  FitsIntCard("NAXIS", 0);
  while (h.size() < 2879 * 80) h += FitsCard("COMMENT filler");
  h += FitsCard("END");
  ASSERT_EQ(h.size(), 2880u * 80);
  EXPECT_TRUE(GunzipFits(gzip_test::Gzip(h), "long.fits.gz", {}).ok());
  std::string longer_header = h;
  longer_header.insert(80, FitsCard("COMMENT one more"));
  auto longer = GunzipFits(gzip_test::Gzip(PaddedHeader(longer_header)), "longer.fits.gz", {});
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kInvalidArgument) << longer.status();
  EXPECT_NE(longer.status().message().find("no END card in its first 2880 cards"),
            std::string::npos) << longer.status();
}

// The gzip stream of GzipOfParts is what it claims: a sanity check of the generator the
// tests below build their gigabyte files with.
TEST(HostileHeaders, GzipOfPartsInflatesToItsParts) {
  const std::string header = Float64PlaneHeader("", 10, 7);
  const std::string gz = gzip_test::GzipOfParts({{header, 10 * 7 * 8 + 2000}, {"tail", 3}});
  std::string want = header + std::string(10 * 7 * 8 + 2000, '\0') + "tail" + std::string(3, '\0');
  std::string got;
  GzipInflater inflater("parts.gz", [&](absl::string_view p) {
    got.append(p.data(), p.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(inflater.Feed(gz).ok());
  ASSERT_TRUE(inflater.Finish().ok());
  EXPECT_EQ(got, want);
}

// Two 8000 x 8192 float64 images of zeros, the primary and IVAR, and no IMAGE: 1 GB of
// FITS in under 1 MB of gzip, within the default limits. Refused from the primary header.
TEST(HostileHeaders, ZeroPlanesWithoutImageAreRefusedFromThePrimaryHeader) {
  const std::string gz = gzip_test::ZeroPlanesWithoutImageGz();
  ASSERT_LT(gz.size(), std::size_t{1100} << 10);
  ExpectPreprocRefusedCheaply(gz, absl::StatusCode::kInvalidArgument,
                              "the primary HDU holds data [8000][8192] but is not the IMAGE HDU");
  // The plain twin, small, by path: the same rule.
  const std::string dir = testing::MakeTempDir();
  const std::string data(static_cast<std::size_t>(PaddedDataBytes(16 * 8 * 8)), '\0');
  const std::string small = Float64PlaneHeader("", 16, 8) + data + Float64PlaneHeader("IVAR", 16, 8) +
                            data + Float64PlaneHeader("IMAGE", 16, 8) + data;
  for (const std::string& name : {std::string("/twin.fits"), std::string("/twin.fits.gz")}) {
    ASSERT_TRUE(testing::WriteBytes(
        dir + name, absl::EndsWith(name, ".gz") ? gzip_test::Gzip(small) : small));
    auto twin = PreprocReader::Open(dir + name, {});
    EXPECT_EQ(twin.status().code(), absl::StatusCode::kInvalidArgument) << twin.status();
    EXPECT_NE(twin.status().message().find("primary HDU holds data [8][16] but is not the IMAGE"),
              std::string::npos) << twin.status();
  }
}

// IMAGE small, then an IVAR of another shape declaring 512 MB of zeros: refused from IVAR's
// header, before its data inflate.
TEST(HostileHeaders, PlaneShapesThatDisagreeAreRefusedFromTheirHeaders) {
  const std::string empty_primary =
      PaddedHeader(FitsCard("SIMPLE  =                    T") + FitsIntCard("BITPIX", 8) +
                   FitsIntCard("NAXIS", 0) + FitsCard("END"));
  const std::string gz = gzip_test::GzipOfParts(
      {{empty_primary, 0},
       {Float64PlaneHeader("IMAGE", 64, 32), static_cast<uint64_t>(PaddedDataBytes(64 * 32 * 8))},
       {Float64PlaneHeader("IVAR", 8192, 8000),
        static_cast<uint64_t>(PaddedDataBytes(int64_t{8192} * 8000 * 8))}});
  ExpectPreprocRefusedCheaply(gz, absl::StatusCode::kInvalidArgument,
                              "IVAR shape [8000][8192] does not match IMAGE shape [32][64]");
}

// The same zero planes sent as a PSF: refused from the primary header too (a PSF's primary
// HDU is XTRACE or holds no data), and so is a plain PSF so laid out.
TEST(HostileHeaders, ZeroPlanesAsAPsfAreRefusedFromThePrimaryHeader) {
  const std::string gz = gzip_test::ZeroPlanesWithoutImageGz();
  absl::Status status;
  const int64_t extra = testing::PeakExtraResident(
      [&] { status = Psf::LoadFromMemory(gz.data(), gz.size(), "psf.fits.gz", {}).status(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("primary HDU holds data (8192x8000 in FITS axis order) but "
                                  "is not the XTRACE HDU"),
            std::string::npos) << status;
  if (extra >= 0) {
    EXPECT_LT(extra, kFewMegabytes) << "peak extra resident bytes";
  }
  const std::string data(static_cast<std::size_t>(PaddedDataBytes(16 * 8 * 8)), '\0');
  const std::string plain = Float64PlaneHeader("", 16, 8) + data +
                            Float64PlaneHeader("XTRACE", 16, 8) + data;
  for (const std::string& bytes : {plain, gzip_test::Gzip(plain)}) {
    auto psf = Psf::LoadFromMemory(bytes.data(), bytes.size(), "psf", {});
    EXPECT_EQ(psf.status().code(), absl::StatusCode::kInvalidArgument) << psf.status();
    EXPECT_NE(psf.status().message().find("primary HDU holds data (16x8 in FITS axis order)"),
              std::string::npos) << psf.status();
  }
}

// An image extension the reader never moves to (here a 512 MB float64 plane of zeros
// between IMAGE and IVAR) is inflated and dropped, not held: the file reads as its plain
// twin, in a few MB.
TEST(HostileHeaders, UnusedImageExtensionsAreDroppedNotHeld) {
  const std::string empty_primary =
      PaddedHeader(FitsCard("SIMPLE  =                    T") + FitsIntCard("BITPIX", 8) +
                   FitsIntCard("NAXIS", 0) + FitsCard("END"));
  const auto small = static_cast<uint64_t>(PaddedDataBytes(64 * 32 * 8));
  const std::string gz = gzip_test::GzipOfParts(
      {{empty_primary, 0},
       {Float64PlaneHeader("IMAGE", 64, 32), small},
       {Float64PlaneHeader("JUNK", 8192, 8000),
        static_cast<uint64_t>(PaddedDataBytes(int64_t{8192} * 8000 * 8))},
       {Float64PlaneHeader("IVAR", 64, 32), small}});
  absl::StatusOr<PreprocImage> frame;
  std::string upload = gz;
  const int64_t extra = testing::PeakExtraResident([&] {
    auto reader = PreprocReader::OpenMemory(std::move(upload), "upload", {});
    frame = reader.ok() ? reader->Read() : reader.status();
  });
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->width, 64);
  EXPECT_EQ(frame->height, 32);
  if (extra >= 0) {
    EXPECT_LT(extra, kFewMegabytes) << "peak extra resident bytes";
  }
  // The plain twin (the unused plane small) reads the same, and so does its gzip.
  const std::string zeros(static_cast<std::size_t>(small), '\0');
  const std::string plain = empty_primary + Float64PlaneHeader("IMAGE", 64, 32) + zeros +
                            Float64PlaneHeader("JUNK", 16, 8) +
                            std::string(static_cast<std::size_t>(PaddedDataBytes(16 * 8 * 8)), '\0') +
                            Float64PlaneHeader("IVAR", 64, 32) + zeros;
  const std::string plain_gz = gzip_test::Gzip(plain);
  auto a = ReadPreprocFromMemory(plain.data(), plain.size(), "twin", {});
  auto b = ReadPreprocFromMemory(plain_gz.data(), plain_gz.size(), "twin", {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->image, b->image);
  EXPECT_EQ(a->ivar, b->ivar);
  EXPECT_EQ(a->image, frame->image);
}

}  // namespace
}  // namespace spexd::core
