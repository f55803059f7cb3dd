// The one-call gzip inflation (libdeflate, core/io/internal/gzip.h InflateGzipInto) and how GunzipFits
// chooses it: what it accepts (members, padding), what it refuses (capacity, corrupt,
// truncated, lying ISIZE), that a bomb never gets its buffer, and that every input the
// one-call path cannot take still gives the streaming path's result or error.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>

#include "core/base/parallel_for.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using gzip_test::FitsImageHeader;
using gzip_test::Gzip;
using gzip_test::NoiseBytes;

// A primary HDU declaring a `width` x `height` float32 image; with `data`, its data follow
// (noise, padded to whole blocks), otherwise only the header.
std::string ImageFits(long width, long height, bool data) {
  const std::string h = FitsImageHeader(width, height);
  if (!data) return h;
  const std::size_t bytes = static_cast<std::size_t>(width * height * 4);
  std::string d = NoiseBytes(bytes, 11);
  d.resize((bytes + 2879) / 2880 * 2880, '\0');
  return h + d;
}

void SetTrailerSize(std::string* gz, uint32_t isize) {
  for (int i = 0; i < 4; ++i) {
    (*gz)[gz->size() - 4 + static_cast<std::size_t>(i)] = static_cast<char>(isize >> (8 * i));
  }
}

absl::StatusOr<std::string> InflateAll(const std::string& gz, std::size_t capacity) {
  std::string out(capacity, '\0');
  auto n = InflateGzipInto(gz, out.data(), out.size(), "w.gz");
  if (!n.ok()) return n.status();
  out.resize(*n);
  return out;
}

TEST(InflateGzipInto, MembersAndNulPaddingLikeTheStreamingInflater) {
  const std::string a = NoiseBytes(300000, 1), b = NoiseBytes(70000, 2);
  const std::string one = Gzip(a);
  EXPECT_EQ(GzipTrailerSize(one), a.size());
  auto exact = InflateAll(one, a.size());
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(*exact, a);
  auto two = InflateAll(Gzip(a) + Gzip(b) + std::string(512, '\0'), a.size() + b.size());
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, a + b);
  auto junk = InflateAll(one + std::string(8, '\0') + "junk", 2 * a.size());
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument) << junk.status();
  auto empty = InflateAll("", 100);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument) << empty.status();
}

TEST(InflateGzipInto, NeverWritesPastItsCapacity) {
  const std::string a = NoiseBytes(200000, 3);
  const std::string gz = Gzip(a);
  std::string out(a.size() + 4096, static_cast<char>(0xAB));
  const std::size_t capacity = a.size() - 1000;
  auto n = InflateGzipInto(gz, out.data(), capacity, "w.gz");
  EXPECT_EQ(n.status().code(), absl::StatusCode::kOutOfRange) << n.status();
  EXPECT_EQ(out.substr(capacity), std::string(out.size() - capacity, static_cast<char>(0xAB)));
  // A second member that does not fit either.
  auto second = InflateAll(Gzip(a) + Gzip(a), a.size() + 10);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kOutOfRange) << second.status();
}

TEST(InflateGzipInto, CorruptTruncatedAndLyingTrailersAreInvalidArgument) {
  const std::string a = NoiseBytes(200000, 4);
  const std::string gz = Gzip(a);
  std::string corrupt = gz;
  for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) corrupt[i] ^= 0x5A;
  std::string crc = gz;
  crc[crc.size() - 6] ^= 1;
  std::string larger = gz, smaller = gz;
  SetTrailerSize(&larger, static_cast<uint32_t>(a.size() + 2880));
  SetTrailerSize(&smaller, static_cast<uint32_t>(a.size() - 2880));
  for (const std::string& bad : {corrupt, crc, larger, smaller, gz.substr(0, gz.size() / 2),
                                 gz.substr(0, gz.size() - 1), gz.substr(0, 5)}) {
    auto out = InflateAll(bad, 2 * a.size());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_NE(out.status().message().find("w.gz"), std::string::npos) << out.status();
  }
}

TEST(InflateGzipInto, StopIsPolledBeforeEachMember) {
  const std::string a = NoiseBytes(50000, 5);
  const std::string gz = Gzip(a) + Gzip(a);
  std::string out(2 * a.size(), '\0');
  int polls = 0;
  auto n = InflateGzipInto(gz, out.data(), out.size(), "w.gz", [&] { return ++polls == 2; });
  EXPECT_EQ(n.status().code(), absl::StatusCode::kCancelled) << n.status();
  EXPECT_EQ(polls, 2);
  polls = 0;
  auto all = InflateGzipInto(gz, out.data(), out.size(), "w.gz", [&] { return ++polls > 2; });
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(polls, 2);
}

TEST(WholeInflateCapacity, OnlyForPlausibleTrailers) {
  const FitsSizeLimits limits;  // 1 GiB, 2^28 pixels
  EXPECT_EQ(WholeInflateCapacity(60'000'000, 136'270'080, limits), 136'270'080);
  EXPECT_EQ(WholeInflateCapacity(1000, 16000, limits), 16000);   // ratio 16: still one call
  EXPECT_EQ(WholeInflateCapacity(1000, 17000, limits), 0);       // ratio 17: a bomb's
  EXPECT_EQ(WholeInflateCapacity(1000, 2879, limits), 0);        // under one FITS block
  EXPECT_EQ(WholeInflateCapacity(int64_t{1} << 30, 0xFFFFFFFFu, limits), 0);  // over the limit
  const FitsSizeLimits small{.max_file_bytes = 1 << 20, .max_image_pixels = 1 << 20};
  EXPECT_EQ(WholeInflateCapacity(100000, 1 << 20, small), 1 << 20);
  EXPECT_EQ(WholeInflateCapacity(100000, (1 << 20) + 1, small), 0);
  EXPECT_EQ(WholeInflateCapacity((1 << 20) + 1, 1 << 20, small), 0);  // the input itself
}

TEST(GunzipFitsWhole, ReadsInOneCallPollingStopTwice) {
  const std::string fits = ImageFits(300, 200, true);
  const std::string gz = Gzip(fits + std::string(100, '\0'));  // bytes after the last HDU
  ASSERT_GT(WholeInflateCapacity(static_cast<int64_t>(gz.size()), GzipTrailerSize(gz), {}), 0);
  int polls = 0;
  auto out = GunzipFits(gz, "w.fits.gz", {}, [&] { return ++polls > 2; });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, fits);
  EXPECT_EQ(polls, 2);  // before and after the one call; in steps: none for 240 KB
  // From a descriptor, at an offset.
  const std::string path = testing::MakeTempDir() + "/w.fits.gz";
  ASSERT_TRUE(testing::WriteBytes(path, "xyz" + gz));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(lseek(fd, 3, SEEK_SET), 3);
  polls = 0;
  auto from_fd = GunzipFitsFd(fd, path, {}, [&] { return ++polls > 2; });
  close(fd);
  ASSERT_TRUE(from_fd.ok()) << from_fd.status();
  EXPECT_EQ(*from_fd, fits);
  EXPECT_EQ(polls, 2);
}

// A file of several read pieces (8 MB each, the last one partial) is read on the pool,
// from an offset, and inflates to the same bytes as from memory.
TEST(GunzipFitsWhole, ALargeFileIsReadInPiecesOnThePool) {
  const std::string fits = ImageFits(2800, 2800, true);  // the .gz is ~18 MB: three pieces
  const std::string gz = Gzip(fits);
  ASSERT_GT(gz.size(), std::size_t{16} << 20);
  const std::string path = testing::MakeTempDir() + "/big.fits.gz";
  ASSERT_TRUE(testing::WriteBytes(path, "xyz" + gz));
  auto pool = MakeTaskPool(3);
  for (TaskPool* p : {static_cast<TaskPool*>(nullptr), pool.get()}) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(lseek(fd, 3, SEEK_SET), 3);
    auto out = InflateFitsFd(fd, path, {}, nullptr, nullptr, p);
    close(fd);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_FALSE(out->block.empty());  // the whole-file path, not the steps
    EXPECT_TRUE(out->view() == fits) << (p != nullptr ? "on the pool" : "alone");
  }
}

TEST(GunzipFitsWhole, StopBeforeOrAfterTheCallCancels) {
  const std::string gz = Gzip(ImageFits(300, 200, true));
  for (int stop_at : {1, 2}) {
    int polls = 0;
    auto out = GunzipFits(gz, "w.fits.gz", {}, [&] { return ++polls == stop_at; });
    EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
    EXPECT_EQ(polls, stop_at);
  }
}

TEST(GunzipFitsWhole, WhatOneCallCannotTakeIsInflatedInSteps) {
  const std::string fits = ImageFits(300, 200, true);
  const std::string a = fits.substr(0, 2880 * 40), b = fits.substr(2880 * 40);
  // Two members (the last ISIZE holds only the second), and NUL padding (ISIZE reads 0).
  for (const std::string& gz : {Gzip(a) + Gzip(b), Gzip(fits) + std::string(700, '\0')}) {
    auto out = GunzipFits(gz, "w.fits.gz", {});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, fits);
  }
}

TEST(GunzipFitsWhole, LyingTrailersAreInvalidArgumentNeverOverAllocation) {
  const std::string fits = ImageFits(300, 200, true);
  const std::string gz = Gzip(fits);
  for (uint32_t isize : {static_cast<uint32_t>(fits.size() - 2880),   // one call runs out
                         static_cast<uint32_t>(fits.size() + 2880),   // size mismatch
                         0xFFFFFFF0u}) {                              // over the limit
    std::string lying = gz;
    SetTrailerSize(&lying, isize);
    auto out = GunzipFits(lying, "w.fits.gz", {});
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << isize;
    EXPECT_NE(out.status().message().find("corrupt gzip data"), std::string::npos)
        << out.status();
  }
}

TEST(GunzipFitsWhole, CorruptAndTruncatedKeepTheirStreamingErrors) {
  const std::string gz = Gzip(ImageFits(300, 200, true));
  std::string corrupt = gz;  // trailer intact: the one call is tried first
  for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) corrupt[i] ^= 0x5A;
  auto bad = GunzipFits(corrupt, "w.fits.gz", {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("corrupt gzip data"), std::string::npos) << bad.status();
  auto cut = GunzipFits(gz.substr(0, gz.size() / 2), "w.fits.gz", {});
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument) << cut.status();
  EXPECT_NE(cut.status().message().find("truncated gzip data"), std::string::npos)
      << cut.status();
  // Whole gzip, cut FITS: judged after the one call.
  const std::string fits = ImageFits(300, 200, true);
  auto cut_fits = GunzipFits(Gzip(fits.substr(0, fits.size() - 2 * 2880)), "w.fits.gz", {});
  EXPECT_EQ(cut_fits.status().code(), absl::StatusCode::kInvalidArgument) << cut_fits.status();
  EXPECT_NE(cut_fits.status().message().find("truncated FITS"), std::string::npos)
      << cut_fits.status();
}

TEST(GunzipFitsWhole, BombNeverGetsItsBuffer) {
  // 16 MiB of zeros after a header declaring 40 GB: ratio ~1000, so no 16 MiB buffer; the
  // header is refused before the data inflate (the streaming message says so).
  const std::string bomb = Gzip(ImageFits(100000, 100000, false) + std::string(16 << 20, '\0'));
  EXPECT_EQ(WholeInflateCapacity(static_cast<int64_t>(bomb.size()), GzipTrailerSize(bomb), {}), 0);
  auto out = GunzipFits(bomb, "bomb.fits.gz", {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_NE(out.status().message().find("refused from its header before decompressing"),
            std::string::npos) << out.status();
  // Noise-like data under a header over the pixel limit: one call (its buffer is the
  // trailer's 1.2 MB, within the limits), then the header is refused all the same.
  const std::string quiet = Gzip(ImageFits(100000, 100000, false) + NoiseBytes(1200000, 6));
  ASSERT_GT(WholeInflateCapacity(static_cast<int64_t>(quiet.size()), GzipTrailerSize(quiet), {}), 0);
  auto refused = GunzipFits(quiet, "quiet.fits.gz", {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("refused from its header"), std::string::npos)
      << refused.status();
  // Declared HDU sizes over a smaller byte limit: refused from the header as in steps.
  const FitsSizeLimits small{.max_file_bytes = 1 << 20, .max_image_pixels = int64_t{1} << 28};
  auto big = GunzipFits(Gzip(ImageFits(1000, 1000, false) + NoiseBytes(300000, 7)), "b.gz", small);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_NE(big.status().message().find("declare more than"), std::string::npos) << big.status();
}

}  // namespace
}  // namespace spexd::core
