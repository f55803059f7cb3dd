// Hostile server paths: a FIFO inside a data root must be refused at once
// (it used to block open() forever, past deadlines and the drain), and server-side output
// may only go under the output roots, never replacing an existing file unless asked,
// and never the request's own input or PSF.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Opens the write end of `fifo` now and then, so that a reader stuck in open() (the
// old behaviour) is released and a regression fails on time instead of hanging.
class FifoReleaser {
 public:
  explicit FifoReleaser(std::string fifo)
      : fifo_(std::move(fifo)), thread_([this] {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          while (!done_.load()) {
            const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK);
            if (fd >= 0) ::close(fd);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }) {}
  ~FifoReleaser() {
    done_.store(true);
    thread_.join();
  }

 private:
  std::string fifo_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(HostilePathTest, AFifoInADataRootIsRefusedAtOnceAndTheServerKeepsWorking) {
  const std::string fifo = Inputs().data_dir + "/pipe.fits";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  FifoReleaser releaser(fifo);
  server::ServerOptions o = TestServerOptions();
  o.scheduling.prefetch = 1;  // one loader: a single stuck open() would stall every request
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  client::ClientOptions once;
  once.max_attempts = 1;
  auto c = Connect(*server, once);
  const auto t0 = Clock::now();
  auto psf = c->LoadPsfFromServerPath(fifo);
  EXPECT_EQ(psf.status().code(), absl::StatusCode::kInvalidArgument) << psf.status();
  auto good_psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(good_psf.ok()) << good_psf.status();
  v1::ExtractHeader h = SmallHeader(good_psf->id());
  h.set_server_path(fifo);
  for (int i = 0; i < 3; ++i) {
    auto frame = RemoteExtractFrame(*c, h, nullptr);
    EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument) << frame.status();
  }
  EXPECT_LT(SecondsSince(t0), 2.0) << "a FIFO blocked the server";
  // Reprocessing still runs, and the drain finishes quickly.
  EXPECT_TRUE(RemoteExtractFrame(*c, SmallHeader(good_psf->id()), &Inputs().frame_bytes).ok());
  const auto drain = Clock::now();
  server->Drain(absl::Seconds(10));
  EXPECT_LT(SecondsSince(drain), 2.0);
  ::unlink(fifo.c_str());
}

TEST(HostilePathTest, AFifoAsPreloadedPsfFailsWarmUpWithoutHanging) {
  const std::string fifo = Inputs().data_dir + "/preload-pipe.fits";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  FifoReleaser releaser(fifo);
  server::ServerOptions o = TestServerOptions();
  o.storage.preload_psfs = {fifo};
  auto server = server::SpexdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto t0 = Clock::now();
  absl::Status warm = (*server)->WaitForWarmUp(absl::Seconds(10));
  EXPECT_EQ(warm.code(), absl::StatusCode::kInvalidArgument) << warm;
  EXPECT_LT(SecondsSince(t0), 2.0);
  ::unlink(fifo.c_str());
}

class ServerOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o = TestServerOptions();
    // The data root is writable here too, so that the input and PSF are reachable as
    // outputs: they must still never be replaced.
    o.storage.output_roots = {Inputs().output_dir, Inputs().data_dir};
    server_ = StartServer(o);
    ASSERT_NE(server_, nullptr);
    client::ClientOptions once;
    once.max_attempts = 1;
    client_ = Connect(*server_, once);
    auto psf = client_->LoadPsfFromServerPath(Inputs().psf_path);
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
  }

  absl::Status ExtractTo(const std::string& out, bool overwrite) {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(Inputs().frame_path);
    h.set_server_output_path(out);
    h.set_overwrite(overwrite);
    return client_->Extract(h, nullptr, false, client::ExtractCallbacks{});
  }

  std::unique_ptr<server::SpexdServer> server_;
  std::unique_ptr<client::SpexdClient> client_;
  std::string psf_id_;
};

TEST_F(ServerOutputTest, ExistingFilesAreKeptUnlessOverwriteAndInputsNeverReplaced) {
  // A directory of its own inside the output root: other tests of this process write
  // into the root itself.
  const std::string dir =
      absl::StrCat(Inputs().output_dir, "/kept-", ::getpid(), "-", absl::ToUnixNanos(absl::Now()));
  ASSERT_TRUE(std::filesystem::create_directory(dir)) << dir;
  const std::string out = dir + "/kept.fits";
  ASSERT_TRUE(WriteBytes(out, "precious"));
  absl::Status st = ExtractTo(out, false);
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists) << st;
  EXPECT_EQ(ReadBytes(out), "precious");
  st = ExtractTo(out, true);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_NE(ReadBytes(out), "precious");
  // The request's own input and its PSF, even with overwrite.
  const std::string frame_before = ReadBytes(Inputs().frame_path);
  st = ExtractTo(Inputs().frame_path, true);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(ReadBytes(Inputs().frame_path), frame_before);
  st = ExtractTo(Inputs().psf_path, true);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(ReadBytes(Inputs().psf_path), Inputs().psf_bytes);
  // No temporary files left in the output directory (only kept.fits).
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    entries += 1;
    EXPECT_EQ(e.path().filename(), "kept.fits");
  }
  EXPECT_EQ(entries, 1);
}

TEST(ServerOutputRootsTest, OutputOnlyUnderTheOutputRoots) {
  server::ServerOptions o = TestServerOptions();
  auto server = StartServer(o);  // output root: output_dir only
  ASSERT_NE(server, nullptr);
  client::ClientOptions once;
  once.max_attempts = 1;
  auto c = Connect(*server, once);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok());
  v1::ExtractHeader h = SmallHeader(psf->id());
  h.set_server_path(Inputs().frame_path);
  h.set_server_output_path(Inputs().data_dir + "/not-writable.fits");  // a data root
  absl::Status st = c->Extract(h, nullptr, false, client::ExtractCallbacks{});
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_NE(::access((Inputs().data_dir + "/not-writable.fits").c_str(), F_OK), 0);
  // Without output roots, server-side output is off.
  o.storage.output_roots.clear();
  auto no_output = StartServer(o);
  ASSERT_NE(no_output, nullptr);
  auto c2 = Connect(*no_output, once);
  auto psf2 = c2->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf2.ok());
  h.set_psf_id(psf2->id());
  h.set_server_output_path(Inputs().output_dir + "/x.fits");
  st = c2->Extract(h, nullptr, false, client::ExtractCallbacks{});
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_NE(st.message().find("--output_roots"), absl::string_view::npos) << st;
}

}  // namespace
}  // namespace spexd::testing
