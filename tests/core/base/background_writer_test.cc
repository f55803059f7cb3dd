// core::BackgroundWriter: ranges queued in any order from several threads make the file;
// Flush writes on its own thread what a busy pool has not reached; a write error comes
// back and sticks; a writer gone before its task starts writes nothing more.
#include "core/base/background_writer.h"

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
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using spexd::testing::MakeTempDir;
using spexd::testing::ReadBytes;

std::string WriterTestBytes(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

// A pool whose only thread is held by a first task until Release.
class OneHeldThread {
 public:
  OneHeldThread() : pool_(MakeTaskPool(1)) {
    EXPECT_TRUE(pool_->Post([this] {
      held_.Notify();
      release_.WaitForNotification();
    }));
    held_.WaitForNotification();
  }
  ~OneHeldThread() { Release(); }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
    pool_->Shutdown();
  }
  TaskPool* get() { return pool_.get(); }

 private:
  std::unique_ptr<TaskPool> pool_;
  absl::Notification held_, release_;
};

class BackgroundWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = MakeTempDir() + "/file.bin";
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }

  std::string path_;
  int fd_ = -1;
};

TEST_F(BackgroundWriterTest, RangesQueuedInAnyOrderFromSeveralThreadsMakeTheFile) {
  const std::string bytes = WriterTestBytes(1 << 20, 3);
  std::vector<int64_t> cuts = {0};
  std::mt19937_64 rng(5);
  while (cuts.back() < static_cast<int64_t>(bytes.size())) {
    cuts.push_back(std::min<int64_t>(cuts.back() + 1 + static_cast<int64_t>(rng() % 40000),
                                     static_cast<int64_t>(bytes.size())));
  }
  std::vector<int> order(cuts.size() - 1);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::unique_ptr<TaskPool> pool = MakeTaskPool(2);
  BackgroundWriter writer(fd_, path_, pool.get());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t k = static_cast<std::size_t>(t); k < order.size(); k += 4) {
        const int i = order[k];
        EXPECT_TRUE(writer.Add(cuts[i], bytes.data() + cuts[i], cuts[i + 1] - cuts[i]).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(writer.Flush().ok());
  EXPECT_TRUE(ReadBytes(path_) == bytes);
}

// The queued ranges wait for the pool's task while its thread is busy; Flush does not wait
// for it but writes them itself, and the task, when it runs, finds nothing left.
TEST_F(BackgroundWriterTest, FlushWritesOnTheCallersThreadWhatABusyPoolHasNotReached) {
  const std::string bytes = WriterTestBytes(300000, 7);
  OneHeldThread busy;
  BackgroundWriter writer(fd_, path_, busy.get());
  ASSERT_TRUE(writer.Add(100000, bytes.data() + 100000, 200000).ok());
  ASSERT_TRUE(writer.Add(0, bytes.data(), 100000).ok());
  EXPECT_EQ(ReadBytes(path_).size(), 0u) << "Add wrote on the caller's thread";
  ASSERT_TRUE(writer.Flush().ok());
  EXPECT_TRUE(ReadBytes(path_) == bytes);
  busy.Release();
  EXPECT_TRUE(ReadBytes(path_) == bytes);
}

TEST_F(BackgroundWriterTest, AWriteErrorComesBackFromFlushAndLaterAddsAndSticks) {
  const std::string bytes = WriterTestBytes(50000, 9);
  const int read_only = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  std::unique_ptr<TaskPool> pool = MakeTaskPool(1);
  BackgroundWriter writer(read_only, path_, pool.get());
  const absl::Status queued = writer.Add(0, bytes.data(), 20000);
  const absl::Status flushed = writer.Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kInternal);
  EXPECT_NE(flushed.message().find("write failed"), std::string::npos) << flushed;
  EXPECT_TRUE(queued.ok() || queued == flushed) << queued;
  EXPECT_EQ(writer.Add(20000, bytes.data() + 20000, 30000), flushed);
  EXPECT_EQ(writer.Flush(), flushed);
  ::close(read_only);
}

// Gone with its task posted and not started: the task, when it runs, touches neither the
// descriptor (closed, its number perhaps another file's by then) nor the bytes.
TEST_F(BackgroundWriterTest, AWriterGoneBeforeItsTaskStartsWritesNothingMore) {
  OneHeldThread busy;
  {
    auto bytes = std::make_unique<std::string>(WriterTestBytes(10000, 11));
    BackgroundWriter writer(fd_, path_, busy.get());
    ASSERT_TRUE(writer.Add(0, bytes->data(), static_cast<int64_t>(bytes->size())).ok());
  }
  ::close(fd_);
  const std::string other = MakeTempDir() + "/other.bin";
  fd_ = ::open(other.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd_, 0);
  busy.Release();
  EXPECT_EQ(ReadBytes(path_).size(), 0u);
  EXPECT_EQ(ReadBytes(other).size(), 0u);
}

TEST_F(BackgroundWriterTest, WithoutAPoolThreadAddWritesAtOnce) {
  const std::string bytes = WriterTestBytes(40000, 13);
  TaskPool no_threads;
  BackgroundWriter writer(fd_, path_, &no_threads);
  ASSERT_TRUE(writer.Add(0, bytes.data(), 40000).ok());
  EXPECT_TRUE(ReadBytes(path_) == bytes);
  BackgroundWriter no_pool(fd_, path_, nullptr);
  ASSERT_TRUE(no_pool.Add(40000, bytes.data(), 1000).ok());
  EXPECT_EQ(ReadBytes(path_).size(), 41000u);
}

}  // namespace
}  // namespace spexd::core
