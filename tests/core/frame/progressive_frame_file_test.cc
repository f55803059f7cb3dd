// core::ProgressiveFrameFile: a frame file written bundle by bundle
// is byte for byte FrameToFits's, whatever the order of the bundles; refusals and write
// errors are errors, never crashes.
#include "core/frame/progressive_frame_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "core/base/parallel_for.h"
#include "core/base/float_convert.h"
#include "core/frame/frame_writer.h"
#include "core/io/plane_buffer.h"
#include "core/io/fits_file.h"
#include "gtest/gtest.h"
#include "tests/frame_fixtures.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using spexd::testing::FileShapeOf;
using spexd::testing::FrameRows;
using spexd::testing::MakeTempDir;
using spexd::testing::MakeTestFibermap;
using spexd::testing::MakeTestFrame;
using spexd::testing::R1FrameMeta;
using spexd::testing::ReadBytes;

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
                                 double pause_seconds = 0,
                                 const std::vector<FrameScore>* given_scores = nullptr) {
    auto file = ProgressiveFrameFile::Create(FileShapeOf(f), meta, fd_, path_, options, keep_image_);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return "";
    std::vector<int> rows;
    for (int r = 0; r < f.nspec; r += bundle) rows.push_back(r);
    std::shuffle(rows.begin(), rows.end(), std::mt19937_64(seed));
    for (int r : rows) {
      BundleResult b = FrameRows(f, r / bundle, r, std::min(bundle, f.nspec - r));
      if (narrow_resolution_) {  // RESOLUTION's bytes as a device narrowed them
        b.rdiags_file = PlaneBuffer<char>::Make(4 * b.rdiags.size(), nullptr);
        const uint64_t sum =
            NarrowToBigEndianFloat32(b.rdiags.data(), b.rdiags.size(), b.rdiags_file.data());
        if (give_word_sum_) b.rdiags_file_word_sum = sum + word_sum_error_;
        b.rdiags.clear();
      }
      const absl::Status st = (*file)->AddRows(r, b);
      EXPECT_TRUE(st.ok()) << st;
    }
    if (pause_seconds > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(pause_seconds));
    }
    const absl::Status st = (*file)->Finish(f, given_scores);
    EXPECT_TRUE(st.ok()) << st;
    std::string pieces;
    for (absl::string_view p : (*file)->pieces()) pieces.append(p.data(), p.size());
    const std::string written = ReadBytes(path_);
    EXPECT_EQ(static_cast<int64_t>(written.size()), (*file)->size());
    if (keep_image_) {
      EXPECT_TRUE(written == pieces) << "pieces() are not the file's bytes";
    } else {
      EXPECT_TRUE(pieces.empty()) << "no image was kept";
    }
    return written;
  }

  std::string path_;
  int fd_ = -1;
  bool keep_image_ = true;  // Create's: false as spexctl writes (encoded in a reused buffer)
  bool narrow_resolution_ = false;  // each bundle's RESOLUTION given as the file's bytes
  bool give_word_sum_ = false;       // ... with the sum of their words, off by word_sum_error_
  uint64_t word_sum_error_ = 0;
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
  const Frame f = MakeTestFrame(60, 700, 5, 9, /*specials=*/true);
  FrameMetadata meta = R1FrameMeta();
  meta.fibermap_fits = MakeTestFibermap(70, /*checksum=*/true);
  FitsWriteOptions options;
  options.checksum_time = "2026-11-23T12:00:00";
  for (bool keep : {true, false}) {
    keep_image_ = keep;
    for (int threads : {1, 3}) {
      for (uint64_t seed : {1u, 2u}) {
        SCOPED_TRACE(::testing::Message() << threads << " threads, order " << seed
                                          << (keep ? ", image kept" : ", no image"));
        options.threads = threads;
        ASSERT_EQ(::ftruncate(fd_, 0), 0);
        const std::string want = *FrameToFits(f, meta, options);
        ExpectSameBytes(WriteProgressively(f, meta, 25, options, seed), want);
      }
    }
  }
}

// A bundle's RESOLUTION given as the file's bytes (big-endian float32, narrowed where it
// was computed) gives the bytes and DATASUM of the same values given as float64: NaNs of
// either sign and any payload, infinities, signed zeros, float64 denormals (which round to
// zero), float32 denormals, values that round to infinity or to the largest float, and
// ties, with and without the image.
TEST_F(ProgressiveFrameFileTest, ResolutionGivenAsFileBytesGivesTheSameFile) {
  Frame f = MakeTestFrame(60, 700, 5, 9, /*specials=*/true);
  const double inf = std::numeric_limits<double>::infinity();
  const double flt_max = std::numeric_limits<float>::max();
  const double specials[] = {
      std::nan(""), -std::nan(""), std::nan("0x5555"), -std::nan("0x7ffff12345678"),
      std::numeric_limits<double>::signaling_NaN(), inf, -inf, 0.0, -0.0,
      std::numeric_limits<double>::denorm_min(), -4.9e-320, 1e-42, -1.4e-45, 7e-46, 0.7e-45,
      std::numeric_limits<float>::denorm_min() * 1.5, 1e39, -1e300, flt_max,
      flt_max * (1 + 0x1p-25), flt_max * (1 + 0x1p-24), -flt_max * (1 + 0x1p-24 + 0x1p-40),
      1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-50, 1.0 + 3 * 0x1p-24, -(1.0 + 0x1p-24)};
  for (std::size_t k = 0; k < std::size(specials); ++k) {
    f.rdiags[(k * 104729 + 11) % f.rdiags.size()] = specials[k];
  }
  FrameMetadata meta = R1FrameMeta();
  meta.fibermap_fits = MakeTestFibermap(70, /*checksum=*/true);
  FitsWriteOptions options;
  options.checksum_time = "2026-11-29T12:00:00";
  for (bool keep : {true, false}) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads"
                                        << (keep ? ", image kept" : ", no image"));
      options.threads = threads;
      const std::string want = *FrameToFits(f, meta, options);
      keep_image_ = keep;
      narrow_resolution_ = false;
      ASSERT_EQ(::ftruncate(fd_, 0), 0);
      const std::string from_doubles = WriteProgressively(f, meta, 25, options, 5);
      narrow_resolution_ = true;
      ASSERT_EQ(::ftruncate(fd_, 0), 0);
      const std::string from_bytes = WriteProgressively(f, meta, 25, options, 6);
      ExpectSameBytes(from_bytes, from_doubles);
      ExpectSameBytes(from_bytes, want);
      // With their words' sum taken where they were made, DATASUM is built from it.
      give_word_sum_ = true;
      ASSERT_EQ(::ftruncate(fd_, 0), 0);
      ExpectSameBytes(WriteProgressively(f, meta, 25, options, 7), want);
      word_sum_error_ = 1;  // a wrong sum shows: the file takes the given sum, not its own
      ASSERT_EQ(::ftruncate(fd_, 0), 0);
      const std::string off = WriteProgressively(f, meta, 25, options, 8);
      ASSERT_EQ(off.size(), want.size());
      EXPECT_NE(off, want);
      give_word_sum_ = false;
      word_sum_error_ = 0;
    }
  }
}

// RESOLUTION's bytes of the wrong size are an error, never a short write.
TEST_F(ProgressiveFrameFileTest, ResolutionFileBytesOfTheWrongSizeAreRefused) {
  const Frame f = MakeTestFrame(10, 50, 2, 3, /*specials=*/false);
  auto file = ProgressiveFrameFile::Create(FileShapeOf(f), R1FrameMeta(), fd_, path_);
  ASSERT_TRUE(file.ok()) << file.status();
  BundleResult b = FrameRows(f, 0, 0, 5);
  b.rdiags_file = PlaneBuffer<char>::Make(4 * b.rdiags.size() - 4, nullptr);
  std::fill(b.rdiags_file.begin(), b.rdiags_file.end(), '\0');
  b.rdiags.clear();
  EXPECT_EQ((*file)->AddRows(0, b).code(), absl::StatusCode::kInternal);
}

TEST_F(ProgressiveFrameFileTest, FullSizeFrameWithoutFibermapOrScores) {
  const Frame f = MakeTestFrame(500, 2326, 5, 22, /*specials=*/true);
  FrameMetadata meta = R1FrameMeta();
  FitsWriteOptions options;
  options.checksum_time = "2026-11-23T12:00:01";
  ExpectSameBytes(WriteProgressively(f, meta, 25, options, 3), *FrameToFits(f, meta, options));
  keep_image_ = false;
  ASSERT_EQ(::ftruncate(fd_, 0), 0);
  ExpectSameBytes(WriteProgressively(f, meta, 25, options, 8), *FrameToFits(f, meta, options));
  meta.scores = false;
  for (bool keep : {true, false}) {
    keep_image_ = keep;
    ASSERT_EQ(::ftruncate(fd_, 0), 0);
    const std::string no_scores = WriteProgressively(f, meta, 25, options, 4);
    ExpectSameBytes(no_scores, *FrameToFits(f, meta, options));
    EXPECT_EQ(no_scores.find("SCORES"), std::string::npos);
  }
}

// The image comes from a pool as the last frame left it, not zero-filled: every byte of
// the file is written (a block full of 0xA5 gives FrameToFits's bytes), with and without a
// FIBERMAP and SCORES, and again from the block the first file gave back.
TEST_F(ProgressiveFrameFileTest, AReusedImageBlockNeedsNoZeroFill) {
  const Frame f = MakeTestFrame(60, 700, 5, 9, /*specials=*/true);
  PlaneBufferPool pool(int64_t{1} << 30);
  for (int pass = 0; pass < 3; ++pass) {
    SCOPED_TRACE(::testing::Message() << "pass " << pass);
    {
      PlaneBuffer<char> dirty = PlaneBuffer<char>::Make(std::size_t{64} << 20, &pool);
      std::memset(dirty.data(), 0xA5, dirty.size());
    }  // back to the pool, dirty
    FrameMetadata meta = R1FrameMeta();
    if (pass != 1) meta.fibermap_fits = MakeTestFibermap(70, /*checksum=*/true);
    meta.scores = pass != 2;
    FitsWriteOptions options;
    options.checksum_time = "2026-11-23T12:00:02";
    const std::string want = *FrameToFits(f, meta, options);
    options.image_buffers = &pool;
    const int64_t reused = pool.reused();
    ASSERT_EQ(::ftruncate(fd_, 0), 0);
    ExpectSameBytes(WriteProgressively(f, meta, 25, options, 5 + pass), want);
    EXPECT_EQ(pool.reused(), reused + 1) << "the file's image is not the dirty block";
  }
}

// Without a given time the headers, built before the bundles, record Finish's time in
// every HDU, as FrameToFits run at that moment would.
TEST_F(ProgressiveFrameFileTest, ChecksumTimeIsThatOfFinish) {
  const Frame f = MakeTestFrame(30, 400, 3, 5, /*specials=*/true);
  FrameMetadata meta = R1FrameMeta();
  meta.fibermap_fits = MakeTestFibermap(40, /*checksum=*/true);
  const std::string written = WriteProgressively(f, meta, 10, {}, 7, /*pause_seconds=*/1.2);
  const std::size_t at = written.find("HDU checksum updated ");
  ASSERT_NE(at, std::string::npos);
  FitsWriteOptions options;
  options.checksum_time = written.substr(at + 21, 19);
  ExpectSameBytes(written, *FrameToFits(f, meta, options));
}

// spexctl's float32 stream: the scores are announced at Create and come at Finish (the
// server's, from the float64 values); the file is FrameToFits's with those scores.
TEST_F(ProgressiveFrameFileTest, ScoresGivenAtFinishAreWritten) {
  const Frame f = MakeTestFrame(50, 600, 4, 11, /*specials=*/false);
  std::vector<FrameScore> given = RawScores(f);
  ASSERT_FALSE(given.empty());
  for (FrameScore& c : given) {
    for (double& v : c.values) v = 2 * v + 1;  // not what the rows would give
  }
  FitsWriteOptions options;
  options.checksum_time = "2026-11-23T12:00:02";
  FrameMetadata announced = R1FrameMeta();
  announced.given_scores.emplace();
  FrameMetadata want_meta = R1FrameMeta();
  want_meta.given_scores = given;
  const std::string want = *FrameToFits(f, want_meta, options);
  ASSERT_NE(want, *FrameToFits(f, R1FrameMeta(), options));
  ExpectSameBytes(WriteProgressively(f, announced, 25, options, 5, 0, &given), want);
  keep_image_ = false;  // as spexctl writes it
  ASSERT_EQ(::ftruncate(fd_, 0), 0);
  ExpectSameBytes(WriteProgressively(f, announced, 25, options, 9, 0, &given), want);
  // --no-scores wins over given scores, as in FrameToFits.
  announced.scores = want_meta.scores = false;
  ASSERT_EQ(::ftruncate(fd_, 0), 0);
  ExpectSameBytes(WriteProgressively(f, announced, 25, options, 6, 0, &given),
                  *FrameToFits(f, want_meta, options));
}

TEST_F(ProgressiveFrameFileTest, RefusalsAreErrors) {
  const Frame f = MakeTestFrame(30, 200, 2, 1, /*specials=*/true);
  const FrameMetadata meta = R1FrameMeta();
  FrameFileShape bad = FileShapeOf(f);
  bad.wave.pop_back();
  EXPECT_EQ(ProgressiveFrameFile::Create(bad, meta, fd_, path_).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto file = ProgressiveFrameFile::Create(FileShapeOf(f), meta, fd_, path_);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->AddRows(0, FrameRows(f, 0, 0, 10)).ok());
  EXPECT_FALSE((*file)->AddRows(5, FrameRows(f, 0, 5, 10)).ok());   // rows 5..9 again
  EXPECT_FALSE((*file)->AddRows(25, FrameRows(f, 2, 20, 10)).ok());  // past the last row
  BundleResult raw = FrameRows(f, 1, 10, 10);
  raw.per_angstrom = false;
  EXPECT_FALSE((*file)->AddRows(10, raw).ok());
  EXPECT_FALSE((*file)->Finish(f).ok());  // rows 10..29 missing
}

// Little-endian float32 bytes of `v` (as a float32 stream carries them).
std::string Float32Bytes(const std::vector<double>& v) {
  std::string out(v.size() * sizeof(float), '\0');
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    std::memcpy(out.data() + 4 * i, &f, 4);
  }
  return out;
}

// A float32 stream's rows, written as they came, give the bytes of the rows of float64
// values they round, whether the image is kept (.gz, the server) or not (spexctl), with
// NaN and infinities among them; rows that do not fit, and a file that would compute its
// scores from the rows, are refused.
TEST_F(ProgressiveFrameFileTest, Float32RowsAreTheBytesOfTheValuesTheyRound) {
  const Frame f = MakeTestFrame(75, 400, 3, 13, /*specials=*/true);
  FrameMetadata meta = R1FrameMeta();
  meta.given_scores.emplace();
  const std::vector<FrameScore> given = RawScores(f);
  FitsWriteOptions options;
  options.checksum_time = "2026-11-23T12:00:03";
  options.threads = 3;
  for (bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "image kept" : "no image");
    auto write = [&](bool float32) {
      EXPECT_EQ(::ftruncate(fd_, 0), 0);
      auto file = ProgressiveFrameFile::Create(FileShapeOf(f), meta, fd_, path_, options, keep);
      EXPECT_TRUE(file.ok()) << file.status();
      if (!file.ok()) return std::string();
      for (int b : {1, 2, 0}) {
        const BundleResult rows = FrameRows(f, b, 25 * b, 25);
        if (float32) {
          Float32Rows r;
          r.bundle = b;
          r.nfibers = 25;
          r.flux = Float32Bytes(rows.flux);
          r.ivar = Float32Bytes(rows.ivar);
          r.rdiags = Float32Bytes(rows.rdiags);
          r.chi2pix = Float32Bytes(rows.chi2pix);
          EXPECT_TRUE((*file)->AddRows(25 * b, r).ok());
        } else {
          EXPECT_TRUE((*file)->AddRows(25 * b, rows).ok());
        }
      }
      EXPECT_TRUE((*file)->Finish(f, &given).ok());
      return ReadBytes(path_);
    };
    const std::string from_doubles = write(false);
    ASSERT_FALSE(from_doubles.empty());
    ExpectSameBytes(write(true), from_doubles);
  }
  auto file = ProgressiveFrameFile::Create(FileShapeOf(f), meta, fd_, path_, options);
  ASSERT_TRUE(file.ok()) << file.status();
  Float32Rows short_rows;
  short_rows.nfibers = 25;
  short_rows.flux = short_rows.ivar = short_rows.chi2pix = std::string(25 * 400 * 4, '\0');
  short_rows.rdiags = std::string(25 * 400 * 4, '\0');  // 7 diagonals wanted
  EXPECT_EQ((*file)->AddRows(0, short_rows).code(), absl::StatusCode::kInternal);
  auto computing = ProgressiveFrameFile::Create(FileShapeOf(f), R1FrameMeta(), fd_, path_, options);
  ASSERT_TRUE(computing.ok()) << computing.status();
  short_rows.rdiags = std::string(25 * 7 * 400 * 4, '\0');
  const absl::Status refused = (*computing)->AddRows(0, short_rows);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_NE(refused.message().find("given"), std::string::npos) << refused;
}

// Without the image (spexctl) the rows are written by the call that encodes them, so the
// first one fails; with it they are queued for the pool's writer task, and the failure
// comes back from a later call, at the latest from Finish. Every call after it returns it.
TEST_F(ProgressiveFrameFileTest, WriteErrorSticksAndNothingCrashes) {
  const Frame f = MakeTestFrame(20, 300, 2, 2, /*specials=*/true);
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "image kept" : "no image");
    const int read_only = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(read_only, 0);
    auto file = ProgressiveFrameFile::Create(FileShapeOf(f), R1FrameMeta(), read_only, path_, {},
                                             keep);
    ASSERT_TRUE(file.ok()) << file.status();
    const absl::Status first = (*file)->AddRows(0, FrameRows(f, 0, 0, 10));
    const absl::Status second = (*file)->AddRows(10, FrameRows(f, 1, 10, 10));
    const absl::Status finished = (*file)->Finish(f);
    EXPECT_EQ(finished.code(), absl::StatusCode::kInternal);
    EXPECT_NE(finished.message().find("write failed"), std::string::npos) << finished;
    if (!keep) {
      EXPECT_EQ(first, finished);
    }
    EXPECT_TRUE(first.ok() || first == finished) << first;
    EXPECT_TRUE(second.ok() || second == finished) << second;
    EXPECT_EQ((*file)->Finish(f), finished);
    EXPECT_EQ((*file)->WriteRest(), finished);
    ::close(read_only);
  }
}

// With the image, the rows are encoded without waiting for the file: while the write
// pool's only thread is held (the encoding pool has threads free), every AddRows and
// Finish(..., write_rest = false) return with nothing written, the bytes in memory are
// FrameToFits's, and WriteRest writes them all on the caller's thread.
TEST_F(ProgressiveFrameFileTest, RowsAreEncodedWithoutWaitingForTheFilesWrites) {
  const Frame f = MakeTestFrame(100, 300, 5, 4, /*specials=*/true);
  const FrameMetadata meta = R1FrameMeta();
  std::unique_ptr<TaskPool> busy = MakeTaskPool(1);
  absl::Notification held, release;
  ASSERT_TRUE(busy->Post([&] {
    held.Notify();
    release.WaitForNotification();
  }));
  held.WaitForNotification();
  FitsWriteOptions options;
  options.checksum_time = "2026-11-23T12:00:00";
  std::unique_ptr<TaskPool> encoding = MakeTaskPool(2);
  options.pool = encoding.get();
  options.threads = 3;
  options.write_pool = busy.get();
  auto file = ProgressiveFrameFile::Create(FileShapeOf(f), meta, fd_, path_, options);
  ASSERT_TRUE(file.ok()) << file.status();
  for (int b : {2, 0, 3, 1}) {
    ASSERT_TRUE((*file)->AddRows(25 * b, FrameRows(f, b, 25 * b, 25)).ok());
  }
  ASSERT_TRUE((*file)->Finish(f, nullptr, /*write_rest=*/false).ok());
  EXPECT_EQ(ReadBytes(path_).size(), 0u) << "rows were written by the calls that encoded them";
  std::string pieces;
  for (absl::string_view p : (*file)->pieces()) pieces.append(p.data(), p.size());
  ExpectSameBytes(pieces, *FrameToFits(f, meta, options));
  ASSERT_TRUE((*file)->WriteRest().ok());
  EXPECT_TRUE(ReadBytes(path_) == pieces);
  release.Notify();
  busy->Shutdown();  // the posted writer task runs and finds nothing left
  EXPECT_TRUE(ReadBytes(path_) == pieces);
}

}  // namespace
}  // namespace spexd::core
