// core::FileRowWriter: a frame file's rows written on a pool beside the
// streaming task give FrameToFits's bytes; an error of any write comes back from Wait and
// from later Adds, and nothing is written after it.
#include "core/frame/file_row_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "core/base/parallel_for.h"
#include "core/frame/frame_writer.h"
#include "gtest/gtest.h"
#include "tests/frame_fixtures.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

class FileRowWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = spexd::testing::MakeTempDir() + "/frame.fits";
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd_, 0);
    meta_.in_psf = "psf.fits";
    meta_.in_img = "preproc.fits";
    meta_.wmin = 5760.0;
    meta_.wmax = 5760.0 + 0.8 * 299;
    meta_.dw = 0.8;
    options_.checksum_time = "2026-11-23T14:00:00";
    options_.pool = pool_.get();
    options_.threads = 3;
  }
  void TearDown() override { ::close(fd_); }

  std::unique_ptr<core::ProgressiveFrameFile> Create(const core::Frame& f) {
    auto file = core::ProgressiveFrameFile::Create(spexd::testing::FileShapeOf(f),
                                                   meta_, fd_, path_, options_);
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? *std::move(file) : nullptr;
  }

  std::unique_ptr<core::TaskPool> pool_ = core::MakeTaskPool(3);
  std::string path_;
  int fd_ = -1;
  core::FrameMetadata meta_;
  core::FitsWriteOptions options_;
};

TEST_F(FileRowWriterTest, RowsWrittenOnThePoolGiveFrameToFitsBytes) {
  const core::Frame f = spexd::testing::MakeTestFrame(100, 300, 5, 4, /*specials=*/false);
  auto file = Create(f);
  ASSERT_NE(file, nullptr);
  {
    FileRowWriter writer(file.get(), pool_.get());
    for (int b : {2, 0, 3, 1}) ASSERT_TRUE(writer.Add(25 * b, std::make_shared<const core::BundleResult>(spexd::testing::FrameRows(f, b, 25 * b, 25))).ok());
    ASSERT_TRUE(writer.Wait().ok());
    EXPECT_GT(writer.seconds(), 0.0);
  }
  ASSERT_TRUE(file->Finish(f).ok());
  std::string got;
  for (absl::string_view p : file->pieces()) got.append(p.data(), p.size());
  EXPECT_TRUE(got == *core::FrameToFits(f, meta_, options_));
  EXPECT_TRUE(spexd::testing::ReadBytes(path_) == got);
}

// Wait writes what is still queued on its own thread: with the pool's only thread held
// by other work, it still returns, and the file is whole.
TEST_F(FileRowWriterTest, WaitWritesTheQueuedRowsItselfWhenThePoolIsBusy) {
  const core::Frame f = spexd::testing::MakeTestFrame(100, 300, 5, 4, /*specials=*/false);
  auto file = Create(f);
  ASSERT_NE(file, nullptr);
  std::unique_ptr<core::TaskPool> busy = core::MakeTaskPool(1);
  absl::Notification held, release;
  ASSERT_TRUE(busy->Post([&] {
    held.Notify();
    release.WaitForNotification();
  }));
  held.WaitForNotification();
  {
    FileRowWriter writer(file.get(), busy.get());
    for (int b : {1, 0, 3, 2}) {
      ASSERT_TRUE(writer.Add(25 * b, std::make_shared<const core::BundleResult>(
                                         spexd::testing::FrameRows(f, b, 25 * b, 25)))
                      .ok());
    }
    absl::Notification waited;
    std::thread waiter([&] {
      EXPECT_TRUE(writer.Wait().ok());
      waited.Notify();
    });
    const bool returned = waited.WaitForNotificationWithTimeout(absl::Seconds(30));
    release.Notify();  // lets the pool's posted drains run (and find nothing left)
    waiter.join();
    EXPECT_TRUE(returned) << "Wait waited for the busy pool";
  }
  ASSERT_TRUE(file->Finish(f).ok());
  std::string got;
  for (absl::string_view p : file->pieces()) got.append(p.data(), p.size());
  EXPECT_TRUE(got == *core::FrameToFits(f, meta_, options_));
}

TEST_F(FileRowWriterTest, AFailedWriteComesBackAndStopsTheRest) {
  const core::Frame f = spexd::testing::MakeTestFrame(100, 300, 5, 4, /*specials=*/false);
  auto file = Create(f);
  ASSERT_NE(file, nullptr);
  FileRowWriter writer(file.get(), pool_.get());
  ASSERT_TRUE(writer.Add(0, std::make_shared<const core::BundleResult>(spexd::testing::FrameRows(f, 0, 0, 25))).ok());
  ASSERT_TRUE(writer.Add(0, std::make_shared<const core::BundleResult>(spexd::testing::FrameRows(f, 0, 0, 25))).ok());  // the same rows again: refused
  const absl::Status waited = writer.Wait();
  EXPECT_FALSE(waited.ok());
  EXPECT_NE(waited.message().find("written twice"), std::string::npos) << waited;
  EXPECT_EQ(writer.Add(25, std::make_shared<const core::BundleResult>(spexd::testing::FrameRows(f, 1, 25, 25))).code(), waited.code());
  EXPECT_FALSE(file->Finish(f).ok());  // rows are missing: no file is finished
}

TEST_F(FileRowWriterTest, DestroyedWithWritesQueuedItWaitsForThem) {
  const core::Frame f = spexd::testing::MakeTestFrame(100, 300, 5, 4, /*specials=*/false);
  auto file = Create(f);
  ASSERT_NE(file, nullptr);
  {
    FileRowWriter writer(file.get(), pool_.get());
    for (int b = 0; b < 4; ++b) ASSERT_TRUE(writer.Add(25 * b, std::make_shared<const core::BundleResult>(spexd::testing::FrameRows(f, b, 25 * b, 25))).ok());
  }  // no Wait: the destructor waits, so the file is complete here
  EXPECT_TRUE(file->Finish(f).ok());
}

// Bundles written several at once (FileRowWriter::kMaxConcurrentBundles on a pool with
// threads to spare), many small ones in a shuffled order: the file, with or without the
// image kept, and a .gz's image, are FrameToFits's bytes. Repeated, since which bundles
// overlap differs from run to run.
TEST_F(FileRowWriterTest, BundlesWrittenAtOnceGiveFrameToFitsBytes) {
  const core::Frame f = spexd::testing::MakeTestFrame(200, 300, 5, 9, /*specials=*/false);
  auto pool = core::MakeTaskPool(6);
  options_.pool = pool.get();
  options_.threads = 6;
  const std::string want = *core::FrameToFits(f, meta_, options_);
  std::vector<int> order;
  for (int b = 0; b < 40; ++b) order.push_back(b);
  std::mt19937 rng(5);
  for (int run = 0; run < 6; ++run) {
    const bool keep_image = run % 3 != 0, gzip = run % 3 == 2;
    SCOPED_TRACE(::testing::Message() << "run " << run << (keep_image ? " image" : "") << (gzip ? " gzip" : ""));
    ASSERT_EQ(::ftruncate(fd_, 0), 0);
    auto file = core::ProgressiveFrameFile::Create(spexd::testing::FileShapeOf(f), meta_, fd_,
                                                   path_, options_, keep_image, gzip);
    ASSERT_TRUE(file.ok()) << file.status();
    std::shuffle(order.begin(), order.end(), rng);
    {
      FileRowWriter writer(file->get(), pool.get());
      for (int b : order) {
        ASSERT_TRUE(writer.Add(5 * b, std::make_shared<const core::BundleResult>(
                                          spexd::testing::FrameRows(f, b, 5 * b, 5))).ok());
      }
      ASSERT_TRUE(writer.Wait().ok());
    }
    ASSERT_TRUE((*file)->Finish(f).ok());
    if (keep_image) {
      std::string got;
      for (absl::string_view p : (*file)->pieces()) got.append(p.data(), p.size());
      EXPECT_TRUE(got == want);
    }
    if (!gzip) {
      EXPECT_TRUE(spexd::testing::ReadBytes(path_) == want);
    }
  }
}

// A host pool without threads (spexd --cpu_threads=1) would hold a posted write until its
// shutdown, and Wait would never return: the rows are written on the caller's thread.
TEST_F(FileRowWriterTest, APoolWithoutThreadsWritesOnTheCallersThread) {
  const core::Frame f = spexd::testing::MakeTestFrame(100, 300, 5, 4, /*specials=*/false);
  auto file = Create(f);
  ASSERT_NE(file, nullptr);
  auto no_threads = core::MakeTaskPool(0);
  FileRowWriter writer(file.get(), no_threads.get());
  for (int b = 0; b < 4; ++b) ASSERT_TRUE(writer.Add(25 * b, std::make_shared<const core::BundleResult>(spexd::testing::FrameRows(f, b, 25 * b, 25))).ok());
  EXPECT_EQ(no_threads->queued(), 0);  // nothing left for a thread that does not exist
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_TRUE(file->Finish(f).ok());
}

}  // namespace
}  // namespace spexd::core
