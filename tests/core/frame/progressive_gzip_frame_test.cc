// A .fits.gz frame file deflated while its bundles come (core::GzipImage under
// core::ProgressiveFrameFile's gzip): zlib inflates it to FrameToFits's bytes whatever the
// order of the bundles and the threads; most chunks are deflated before Finish; every
// HDU's CHECKSUM/DATASUM verify (CFITSIO, reading the .gz itself); errors are errors.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/frame/frame_writer.h"
#include "core/frame/progressive_frame_file.h"
#include "core/io/fits_file.h"
#include "core/io/internal/gzip_image.h"
#include "absl/synchronization/notification.h"
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

// zlib's reading of a whole gzip stream (one member or more); fails the test on an error.
std::string ZlibGunzipAll(const std::string& gz) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  char buf[1 << 16];
  int members = 0;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (ret == Z_STREAM_END) {
      ++members;
      if (zs.avail_in == 0) break;
      inflateReset(&zs);
      continue;
    }
    if (ret != Z_OK) {
      ADD_FAILURE() << "zlib: " << (zs.msg != nullptr ? zs.msg : "error") << " (" << ret << ")";
      break;
    }
  }
  inflateEnd(&zs);
  EXPECT_EQ(members, 1) << "not one gzip member";
  return out;
}

// gz.Finish into a new file `name` in a temporary directory (no pool): the file's bytes,
// or "" after a failure of the test.
std::string FinishToFile(GzipImage& gz, absl::string_view tail, const std::string& name) {
  const std::string path = MakeTempDir() + "/" + name;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  EXPECT_GE(fd, 0);
  const absl::Status st = gz.Finish(tail, nullptr, 1, fd, path);
  ::close(fd);
  EXPECT_TRUE(st.ok()) << st;
  return st.ok() ? ReadBytes(path) : "";
}

std::string Joined(const std::vector<absl::string_view>& pieces) {
  std::string s;
  for (absl::string_view p : pieces) s.append(p.data(), p.size());
  return s;
}

TEST(GzipImageTest, RangesFinalInAnyOrderInflateToTheImageAndTail) {
  std::mt19937_64 rng(11);
  const std::string dir = MakeTempDir();
  TaskPool pool;
  pool.AddThreads(2);
  for (const std::size_t size : {std::size_t{1}, std::size_t{4096}, std::size_t{100003}}) {
    for (const std::size_t chunk : {std::size_t{1000}, std::size_t{4096}, std::size_t{1} << 20}) {
      for (const std::size_t tail_size : {std::size_t{0}, std::size_t{7}, std::size_t{2500}}) {
        SCOPED_TRACE(::testing::Message() << size << " bytes, chunks of " << chunk << ", tail "
                                          << tail_size);
        // Compressible in parts (runs) and not in others (noise), as a frame's float data.
        std::string image(size, '\0'), tail(tail_size, '\0');
        for (std::size_t i = 0; i < size; ++i) image[i] = static_cast<char>(i % 3000 < 1500 ? i / 64 : rng());
        for (char& c : tail) c = static_cast<char>(rng());
        GzipImage gz(image, chunk);
        // Cut into random ranges, declared final in a random order, deflating now and then.
        std::vector<std::pair<int64_t, int64_t>> ranges;
        for (std::size_t at = 0; at < size;) {
          const std::size_t n = std::min<std::size_t>(size - at, 1 + rng() % 3000);
          ranges.emplace_back(static_cast<int64_t>(at), static_cast<int64_t>(n));
          at += n;
        }
        std::shuffle(ranges.begin(), ranges.end(), rng);
        for (std::size_t r = 0; r < ranges.size(); ++r) {
          ASSERT_TRUE(gz.Final(ranges[r].first, ranges[r].second).ok());
          if (r % 5 == 4 || r + 1 == ranges.size()) gz.CompressReady(&pool);
        }
        const std::string path = dir + "/image.gz";
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_GE(fd, 0);
        const absl::Status st = gz.Finish(tail, &pool, 3, fd, path);
        ::close(fd);
        ASSERT_TRUE(st.ok()) << st;
        const std::string file = ReadBytes(path);
        EXPECT_EQ(file, Joined(gz.pieces()));
        EXPECT_EQ(static_cast<int64_t>(file.size()), gz.size());
        EXPECT_TRUE(ZlibGunzipAll(file) == image + tail) << "inflates to other bytes";
        // Each chunk deflated once: by its task, or by Finish when its task had not begun.
        const std::size_t nimage = (size + chunk - 1) / chunk;
        const std::size_t ntail = std::max<std::size_t>(1, (tail_size + chunk - 1) / chunk);
        EXPECT_EQ(static_cast<std::size_t>(gz.early_chunks() + gz.late_chunks()), nimage + ntail);
        EXPECT_GE(static_cast<std::size_t>(gz.late_chunks()), ntail);
      }
    }
  }
}

TEST(GzipImageTest, CutsStartChunksSoThatBytesFinalEarlyNeedNotWait) {
  std::string image(10000, '\0');
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<char>(i * 7919 >> 5);
  // Chunks [0,100) [100,4196) [4196,5000) [5000,9096) [9096,10000): repeated cuts, 0, the
  // end and cuts outside the image change nothing.
  GzipImage gz(image, 4096, {5000, 100, 5000, 0, 10000, 20000, -3});
  ASSERT_TRUE(gz.Final(100, 4900).ok());  // two whole chunks, not the "header" before them
  gz.CompressReady(nullptr);              // deflated here, at once
  ASSERT_TRUE(gz.Final(5000, 5000).ok());
  gz.CompressReady(nullptr);
  ASSERT_TRUE(gz.Final(0, 100).ok());  // last, as a header written by Finish
  const std::string file = FinishToFile(gz, "tail", "cuts.gz");
  EXPECT_EQ(gz.early_chunks(), 4);
  EXPECT_EQ(gz.late_chunks(), 2);  // the first chunk and the tail
  EXPECT_EQ(gz.late_bytes(), 104);
  EXPECT_TRUE(ZlibGunzipAll(file) == image + "tail");
}

// Chunk tasks still queued when Finish comes are Finish's; those still queued when the
// object goes are skipped (they hold what they share with it, not the object).
TEST(GzipImageTest, QueuedChunksAreTakenByFinishOrSkippedAfterTheObjectGoes) {
  const std::string image(64 * 1024, 'a');
  for (const bool finish : {true, false}) {
    SCOPED_TRACE(finish ? "finished" : "destroyed");
    TaskPool pool;
    pool.AddThreads(1);
    absl::Notification release;
    pool.Post([&release] { release.WaitForNotification(); });  // the one thread is busy
    {
      GzipImage gz(image, 4096);
      ASSERT_TRUE(gz.Final(0, static_cast<int64_t>(image.size())).ok());
      gz.CompressReady(&pool);  // 16 tasks queued behind the busy thread
      if (finish) {
        const std::string file = FinishToFile(gz, "", "queued.gz");
        EXPECT_EQ(gz.early_chunks(), 0);
        EXPECT_EQ(gz.late_chunks(), 17);
        EXPECT_TRUE(ZlibGunzipAll(file) == image);
      }
    }
    release.Notify();
    pool.Shutdown();  // the queued tasks run now, after the object: they do nothing
  }
}

TEST(GzipImageTest, BytesDeclaredTwiceOrNeverAreErrors) {
  const std::string image(10000, 'x');
  GzipImage twice(image, 4096);
  ASSERT_TRUE(twice.Final(0, 5000).ok());
  EXPECT_EQ(twice.Final(4000, 100).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(twice.Final(9000, 2000).code(), absl::StatusCode::kInternal);  // past the end
  GzipImage never(image, 4096);
  ASSERT_TRUE(never.Final(0, 9999).ok());
  const absl::Status st = never.Finish("", nullptr, 1, -1, "frame.fits.gz");
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_NE(st.message().find("never written"), std::string::npos) << st;
  EXPECT_EQ(never.Write(-1, "frame.fits.gz").code(), absl::StatusCode::kInternal) << "not sealed";
}

// Writes `f` as a .fits.gz progressively, bundles of `bundle` rows in a shuffled order;
// the file's bytes. Checks what the object says of them.
std::string WriteGzipProgressively(const std::string& path, const Frame& f, const FrameMetadata& meta,
                                   int bundle, const FitsWriteOptions& options, uint64_t seed,
                                   int* early = nullptr, int* late = nullptr,
                                   int64_t* late_bytes = nullptr) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  EXPECT_GE(fd, 0);
  auto file = ProgressiveFrameFile::Create(FileShapeOf(f), meta, fd,
                                           path, options, /*keep_image=*/true, /*gzip=*/true);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return "";
  std::vector<int> rows;
  for (int r = 0; r < f.nspec; r += bundle) rows.push_back(r);
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(seed));
  for (int r : rows) {
    const absl::Status st =
        (*file)->AddRows(r, FrameRows(f, r / bundle, r, std::min(bundle, f.nspec - r)));
    EXPECT_TRUE(st.ok()) << st;
  }
  const absl::Status st = (*file)->Finish(f);
  EXPECT_TRUE(st.ok()) << st;
  ::close(fd);
  const std::string written = ReadBytes(path);
  EXPECT_TRUE(written == Joined((*file)->stored_pieces())) << "stored_pieces() are not the file";
  // pieces(): the uncompressed file, what a file found at the name is compared with.
  EXPECT_TRUE(ZlibGunzipAll(written) == Joined((*file)->pieces()));
  if (early != nullptr) *early = (*file)->gzip_early_chunks();
  if (late != nullptr) *late = (*file)->gzip_late_chunks();
  if (late_bytes != nullptr) *late_bytes = (*file)->gzip_late_bytes();
  return written;
}

TEST(ProgressiveGzipFrameTest, InflatesToFrameToFitsInAnyOrderOnAnyThreads) {
  const Frame f = MakeTestFrame(60, 700, 5, 9, /*specials=*/true);
  FrameMetadata meta = R1FrameMeta();
  meta.fibermap_fits = MakeTestFibermap(70, /*checksum=*/true);
  FitsWriteOptions options;
  options.checksum_time = "2026-11-27T12:00:00";
  const std::string path = MakeTempDir() + "/frame.fits.gz";
  for (int threads : {1, 3}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, order " << seed);
      options.threads = threads;
      const std::string want = *FrameToFits(f, meta, options);
      const std::string gz = WriteGzipProgressively(path, f, meta, 5, options, seed);
      ASSERT_TRUE(IsGzip(gz));
      EXPECT_LT(gz.size(), want.size());
      EXPECT_TRUE(ZlibGunzipAll(gz) == want) << "inflates to other bytes than FrameToFits";
    }
  }
  // --no-scores: the image's last chunk ends the member (no tail).
  meta.scores = false;
  const std::string want = *FrameToFits(f, meta, options);
  EXPECT_TRUE(ZlibGunzipAll(WriteGzipProgressively(path, f, meta, 10, options, 4)) == want);
}

// An r frame's size: most of its ~70 MB are deflated while the rows come, and CFITSIO,
// reading the .gz, verifies every HDU's CHECKSUM and DATASUM (written last, into chunks
// that Finish deflates).
TEST(ProgressiveGzipFrameTest, FullFrameMostlyDeflatedBeforeFinishWithValidChecksums) {
  const Frame f = MakeTestFrame(500, 2326, 5, 22, /*specials=*/true);
  const FrameMetadata meta = R1FrameMeta();
  FitsWriteOptions options;
  options.checksum_time = "2026-11-27T12:00:01";
  options.threads = 1;  // each chunk deflated when its rows complete it: counts fixed
  const std::string path = MakeTempDir() + "/frame-r1.fits.gz";
  int early = 0, late = 0;
  int64_t late_bytes = 0;
  const std::string gz =
      WriteGzipProgressively(path, f, meta, 25, options, 9, &early, &late, &late_bytes);
  EXPECT_TRUE(ZlibGunzipAll(gz) == *FrameToFits(f, meta, options));
  EXPECT_GT(early, 4 * late) << early << " chunks while the rows came, " << late << " at Finish";
  // Left to Finish: MASK (int32 per bin), the headers and SCORES, 100 KB for these.
  const int64_t mask_bytes = int64_t{4} * f.nspec * f.nwave;
  EXPECT_GE(late_bytes, mask_bytes);
  EXPECT_LT(late_bytes, mask_bytes + 100000) << "more than the headers, MASK and SCORES at Finish";
  auto file = FitsFile::OpenRead(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto nhdu = file->NumHdus();
  ASSERT_TRUE(nhdu.ok());
  EXPECT_GE(*nhdu, 7);
  for (int i = 0; i < *nhdu; ++i) {
    ASSERT_TRUE(file->MoveToHduIndex(i).ok());
    int dataok = 0, hduok = 0, status = 0;
    fits_verify_chksum(file->get(), &dataok, &hduok, &status);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(dataok, 1) << "HDU " << i;
    EXPECT_EQ(hduok, 1) << "HDU " << i;
  }
}

// The server hashes the member beside its write: Finish without the write leaves the
// file empty and the member whole in memory; WriteRest writes exactly it.
TEST(ProgressiveGzipFrameTest, TheMemberCanBeWrittenAfterFinish) {
  const Frame f = MakeTestFrame(30, 400, 3, 5, /*specials=*/true);
  FitsWriteOptions options;
  options.checksum_time = "2026-11-28T12:00:00";
  const std::string path = MakeTempDir() + "/frame.fits.gz";
  // Every row of `f` into a gzip frame file on `fd`, finished without the member's write.
  auto finished = [&](int fd) -> std::unique_ptr<ProgressiveFrameFile> {
    auto file = ProgressiveFrameFile::Create(FileShapeOf(f),
                                             R1FrameMeta(), fd, path, options, true, true);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return nullptr;
    for (int r = 0; r < f.nspec; r += 10) EXPECT_TRUE((*file)->AddRows(r, FrameRows(f, r / 10, r, 10)).ok());
    EXPECT_TRUE((*file)->Finish(f, nullptr, /*write_rest=*/false).ok());
    return *std::move(file);
  };
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::unique_ptr<ProgressiveFrameFile> file = finished(fd);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(ReadBytes(path), "");
  const std::string member = Joined(file->stored_pieces());
  ASSERT_TRUE(IsGzip(member));
  EXPECT_TRUE(ZlibGunzipAll(member) == *FrameToFits(f, R1FrameMeta(), options));
  ASSERT_TRUE(file->WriteRest().ok());
  ::close(fd);
  EXPECT_TRUE(ReadBytes(path) == member);
  // A member that cannot be written: Finish succeeds, WriteRest says why, and sticks.
  const int read_only = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  std::unique_ptr<ProgressiveFrameFile> again = finished(read_only);
  ASSERT_NE(again, nullptr);
  const absl::Status st = again->WriteRest();
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_NE(st.message().find("write failed"), std::string::npos) << st;
  EXPECT_EQ(again->WriteRest(), st);
  ::close(read_only);
}

TEST(ProgressiveGzipFrameTest, RefusalsAndWriteErrorsAreErrors) {
  const Frame f = MakeTestFrame(20, 300, 2, 2, /*specials=*/true);
  const std::string path = MakeTempDir() + "/frame.fits.gz";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const FrameFileShape shape = FileShapeOf(f);
  // gzip is deflated from the image: without one it is refused.
  EXPECT_EQ(ProgressiveFrameFile::Create(shape, R1FrameMeta(), fd, path, {}, false, true)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ::close(fd);
  // A descriptor that cannot be written: nothing is written before Finish, which fails.
  const int read_only = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  auto file = ProgressiveFrameFile::Create(shape, R1FrameMeta(), read_only, path, {}, true, true);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->AddRows(0, FrameRows(f, 0, 0, 10)).ok());
  EXPECT_FALSE((*file)->AddRows(5, FrameRows(f, 0, 5, 10)).ok());  // rows 5..9 again
  EXPECT_TRUE((*file)->AddRows(10, FrameRows(f, 1, 10, 10)).ok());
  const absl::Status st = (*file)->Finish(f);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_NE(st.message().find("write failed"), std::string::npos) << st;
  EXPECT_EQ((*file)->Finish(f), st);
  ::close(read_only);
}

}  // namespace
}  // namespace spexd::core
