// core::ProgressiveFrameFile (issue 22, session 9): a frame file written bundle by bundle
// is byte for byte FrameToFits's, whatever the order of the bundles; refusals and write
// errors are errors, never crashes.
#include "core/frame/progressive_frame_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/base/parallel_for.h"
#include "core/frame/frame_writer.h"
#include "core/io/fits_file.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using spexd::testing::MakeTempDir;
using spexd::testing::ReadBytes;

Frame MakeFrame(int nspec, int nwave, int ndiag, uint64_t seed) {
  Frame f;
  f.specmin = 3;
  f.nspec = nspec;
  f.nwave = nwave;
  f.ndiag = ndiag;
  for (int w = 0; w < nwave; ++w) f.wave.push_back(5760.0 + 0.8 * w);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(100.0, 300.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::size_t n = static_cast<std::size_t>(nspec) * nwave;
  for (std::size_t i = 0; i < n; ++i) {
    f.flux.push_back(normal(rng));
    f.ivar.push_back(unit(rng) < 0.05 ? 0.0 : unit(rng) * 1e-3);
    f.chi2pix.push_back(unit(rng) * 3);
    f.mask.push_back(unit(rng) < 0.1 ? static_cast<uint32_t>(rng()) : 0u);
    f.pixmask_fraction.push_back(0.0);
  }
  for (std::size_t i = 0; i < n * (2 * ndiag + 1); ++i) f.rdiags.push_back(unit(rng) * 0.3);
  const double specials[] = {std::nan(""), std::numeric_limits<double>::infinity(), -0.0, 1e-42,
                             1e39};
  for (std::size_t k = 0; k < std::size(specials); ++k) {
    f.flux[(k * 7919) % n] = specials[k];
    f.rdiags[(k * 104729) % f.rdiags.size()] = specials[k];
  }
  return f;
}

std::string MakeFibermap(int rows) {
  auto fm = FitsFile::CreateMemory("fm");
  EXPECT_TRUE(fm.ok());
  int status = 0;
  fits_create_img(fm->get(), BYTE_IMG, 0, nullptr, &status);
  char* ttype[] = {const_cast<char*>("FIBER"), const_cast<char*>("TARGET_RA")};
  char* tform[] = {const_cast<char*>("J"), const_cast<char*>("D")};
  fits_create_tbl(fm->get(), BINARY_TBL, rows, 2, ttype, tform, nullptr, "FIBERMAP", &status);
  for (int r = 0; r < rows; ++r) {
    double ra = 150.0 + 0.001 * r;
    fits_write_col(fm->get(), TINT, 1, r + 1, 1, 1, &r, &status);
    fits_write_col(fm->get(), TDOUBLE, 2, r + 1, 1, 1, &ra, &status);
  }
  fits_write_chksum(fm->get(), &status);  // as desispec's inputs carry it
  EXPECT_EQ(status, 0);
  return *fm->TakeMemory();
}

FrameMetadata MakeMeta() {
  FrameMetadata meta;
  meta.image_header = {"CAMERA  = 'r1      '           / Spectrograph Camera",
                       "EXPTIME =                900.0 / Exposure time"};
  meta.in_psf = "psf-r1.fits";
  meta.in_img = "preproc-r1.fits";
  meta.wmin = 5760.0;
  meta.wmax = 7620.0;
  meta.dw = 0.8;
  return meta;
}

// Rows [row, row + n) of `f` as a finalised bundle.
BundleResult BundleOf(const Frame& f, int index, int row, int n) {
  BundleResult b;
  b.bundle = index;
  b.fiber_begin = f.specmin + row;
  b.nfibers = n;
  b.nwave = f.nwave;
  b.ndiag = f.ndiag;
  b.per_angstrom = true;
  const std::size_t nw = static_cast<std::size_t>(f.nwave);
  const std::size_t nr = nw * static_cast<std::size_t>(2 * f.ndiag + 1);
  auto rows = [&](const std::vector<double>& v, std::size_t per_row) {
    return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(row * per_row),
                               v.begin() + static_cast<std::ptrdiff_t>((row + n) * per_row));
  };
  b.flux = rows(f.flux, nw);
  b.ivar = rows(f.ivar, nw);
  b.chi2pix = rows(f.chi2pix, nw);
  b.rdiags = rows(f.rdiags, nr);
  return b;
}

FrameFileShape ShapeOf(const Frame& f) {
  return {f.specmin, f.nspec, f.nwave, f.ndiag, f.wave};
}

class ProgressiveFrameFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = MakeTempDir() + "/frame.fits";
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }

  // Writes `f` progressively, bundles of `bundle` rows in a shuffled order; the file.
  std::string WriteProgressively(const Frame& f, const FrameMetadata& meta, int bundle,
                                 const FitsWriteOptions& options, uint64_t seed,
                                 double pause_seconds = 0) {
    auto file = ProgressiveFrameFile::Create(ShapeOf(f), meta, fd_, path_, options);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return "";
    std::vector<int> rows;
    for (int r = 0; r < f.nspec; r += bundle) rows.push_back(r);
    std::shuffle(rows.begin(), rows.end(), std::mt19937_64(seed));
    for (int r : rows) {
      const absl::Status st =
          (*file)->AddRows(r, BundleOf(f, r / bundle, r, std::min(bundle, f.nspec - r)));
      EXPECT_TRUE(st.ok()) << st;
    }
    if (pause_seconds > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(pause_seconds));
    }
    const absl::Status st = (*file)->Finish(f);
    EXPECT_TRUE(st.ok()) << st;
    std::string pieces;
    for (absl::string_view p : (*file)->pieces()) pieces.append(p.data(), p.size());
    const std::string written = ReadBytes(path_);
    EXPECT_EQ(static_cast<int64_t>(written.size()), (*file)->size());
    EXPECT_TRUE(written == pieces) << "pieces() are not the file's bytes";
    return written;
  }

  std::string path_;
  int fd_ = -1;
};

void ExpectSameBytes(const std::string& got, const std::string& want) {
  ASSERT_EQ(got.size(), want.size());
  const auto diff = std::mismatch(got.begin(), got.end(), want.begin());
  const std::size_t at = static_cast<std::size_t>(diff.first - got.begin());
  EXPECT_EQ(at, got.size()) << "differs in the card at byte " << at / 80 * 80 << ": "
                            << got.substr(at / 80 * 80, 80) << " | "
                            << want.substr(at / 80 * 80, 80);
}

TEST_F(ProgressiveFrameFileTest, BundlesInAnyOrderGiveFrameToFitsBytes) {
  const Frame f = MakeFrame(60, 700, 5, 9);
  FrameMetadata meta = MakeMeta();
  meta.fibermap_fits = MakeFibermap(70);
  FitsWriteOptions options;
  options.checksum_time = "2026-11-23T12:00:00";
  for (int threads : {1, 3}) {
    for (uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, order " << seed);
      options.threads = threads;
      ASSERT_EQ(::ftruncate(fd_, 0), 0);
      const std::string want = *FrameToFits(f, meta, options);
      ExpectSameBytes(WriteProgressively(f, meta, 25, options, seed), want);
    }
  }
}

TEST_F(ProgressiveFrameFileTest, FullSizeFrameWithoutFibermapOrScores) {
  const Frame f = MakeFrame(500, 2326, 5, 22);
  FrameMetadata meta = MakeMeta();
  FitsWriteOptions options;
  options.checksum_time = "2026-11-23T12:00:01";
  ExpectSameBytes(WriteProgressively(f, meta, 25, options, 3), *FrameToFits(f, meta, options));
  meta.scores = false;
  ASSERT_EQ(::ftruncate(fd_, 0), 0);
  const std::string no_scores = WriteProgressively(f, meta, 25, options, 4);
  ExpectSameBytes(no_scores, *FrameToFits(f, meta, options));
  EXPECT_EQ(no_scores.find("SCORES"), std::string::npos);
}

// Without a given time the headers, built before the bundles, record Finish's time in
// every HDU, as FrameToFits run at that moment would.
TEST_F(ProgressiveFrameFileTest, ChecksumTimeIsThatOfFinish) {
  const Frame f = MakeFrame(30, 400, 3, 5);
  FrameMetadata meta = MakeMeta();
  meta.fibermap_fits = MakeFibermap(40);
  const std::string written = WriteProgressively(f, meta, 10, {}, 7, /*pause_seconds=*/1.2);
  const std::size_t at = written.find("HDU checksum updated ");
  ASSERT_NE(at, std::string::npos);
  FitsWriteOptions options;
  options.checksum_time = written.substr(at + 21, 19);
  ExpectSameBytes(written, *FrameToFits(f, meta, options));
}

TEST_F(ProgressiveFrameFileTest, RefusalsAreErrors) {
  const Frame f = MakeFrame(30, 200, 2, 1);
  const FrameMetadata meta = MakeMeta();
  FrameFileShape bad = ShapeOf(f);
  bad.wave.pop_back();
  EXPECT_EQ(ProgressiveFrameFile::Create(bad, meta, fd_, path_).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto file = ProgressiveFrameFile::Create(ShapeOf(f), meta, fd_, path_);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->AddRows(0, BundleOf(f, 0, 0, 10)).ok());
  EXPECT_FALSE((*file)->AddRows(5, BundleOf(f, 0, 5, 10)).ok());   // rows 5..9 again
  EXPECT_FALSE((*file)->AddRows(25, BundleOf(f, 2, 20, 10)).ok());  // past the last row
  BundleResult raw = BundleOf(f, 1, 10, 10);
  raw.per_angstrom = false;
  EXPECT_FALSE((*file)->AddRows(10, raw).ok());
  EXPECT_FALSE((*file)->Finish(f).ok());  // rows 10..29 missing
}

TEST_F(ProgressiveFrameFileTest, WriteErrorSticksAndNothingCrashes) {
  const Frame f = MakeFrame(20, 300, 2, 2);
  const int read_only = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  auto file = ProgressiveFrameFile::Create(ShapeOf(f), MakeMeta(), read_only, path_);
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::Status first = (*file)->AddRows(0, BundleOf(f, 0, 0, 10));
  EXPECT_EQ(first.code(), absl::StatusCode::kInternal);
  EXPECT_NE(first.message().find("write failed"), std::string::npos) << first;
  EXPECT_EQ((*file)->AddRows(10, BundleOf(f, 1, 10, 10)), first);
  EXPECT_EQ((*file)->Finish(f), first);
  ::close(read_only);
}

}  // namespace
}  // namespace spexd::core
