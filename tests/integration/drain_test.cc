// SIGTERM drain of the real spexd binary: in-flight extractions finish within the grace
// period, new calls are refused, further signals are ignored, the process exits 0; past
// the grace period the rest is cancelled and the process still exits 0 promptly.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/spawned_server.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A frame with a longer grid (about 1 s of CPU work) so that requests are still in
// flight when the signal arrives.
const std::string& LongFrameBytes() {
  static const std::string* bytes = [] {
    auto psf = core::Psf::Load(Inputs().psf_path);
    SyntheticFrameOptions o;
    o.wmax = 5960.0;
    auto made = MakeSyntheticPreproc(*psf, o);
    return new std::string(made.ok() ? *made : std::string());
  }();
  return *bytes;
}

v1::ExtractHeader LongHeader(const std::string& psf_id) {
  v1::ExtractHeader h = SmallHeader(psf_id);
  h.mutable_params()->set_wmax(5960.0);
  return h;
}

struct InFlight {
  std::vector<std::thread> threads;
  std::vector<absl::Status> results;
  std::atomic<int> started{0};
};

// Starts `n` extractions from separate clients; `started` counts FrameHeaders received.
void StartExtractions(int port, const std::string& psf_id, int n, InFlight* f) {
  f->results.assign(n, absl::UnknownError("not finished"));
  for (int i = 0; i < n; ++i) {
    f->threads.emplace_back([port, psf_id, i, f] {
      client::ClientOptions o;
      o.target = absl::StrCat("127.0.0.1:", port);
      o.max_attempts = 1;
      o.extract_deadline_seconds = 120;
      auto c = client::SpexdClient::Create(o);
      client::ExtractCallbacks cb;
      cb.on_header = [f](const v1::FrameHeader&) {
        f->started.fetch_add(1);
        return absl::OkStatus();
      };
      f->results[i] = (*c)->Extract(LongHeader(psf_id), &LongFrameBytes(), false, cb);
    });
  }
}

// Waits (up to 60 s) until one of `f`'s extractions runs and `queued` wait, received whole.
bool RunningWithQueued(int port, const InFlight& f, int queued) {
  client::ClientOptions o;
  o.target = absl::StrCat("127.0.0.1:", port);
  auto probe = client::SpexdClient::Create(o);
  return WaitFor(
      [&] {
        auto info = (*probe)->GetServerInfo();
        return f.started.load() >= 1 && info.ok() && info->queue_depth() == queued;
      },
      60);
}

std::string LoadPsf(int port) {
  client::ClientOptions o;
  o.target = absl::StrCat("127.0.0.1:", port);
  auto c = client::SpexdClient::Create(o);
  // The server may still be warming up: LoadPsf does not wait for warm-up, but retry
  // briefly in case the first connection races the listener.
  for (int i = 0; i < 50; ++i) {
    auto info = (*c)->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    if (info.ok()) return info->id();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

TEST(DrainTest, SigtermFinishesInFlightWorkRefusesNewCallsAndExitsZero) {
  ASSERT_FALSE(LongFrameBytes().empty());
  SpawnedServer spexd({"--drain_seconds=60", "--max_queue=8"});
  const int port = spexd.WaitForPort(30);
  ASSERT_GT(port, 0) << spexd.Log();
  const std::string psf_id = LoadPsf(port);
  ASSERT_FALSE(psf_id.empty()) << spexd.Log();
  InFlight f;
  // One running, four queued: the drain lasts seconds after SIGTERM, so the late call
  // below lands while work is still in flight (with two queued it could land as the
  // server finished, and gRPC's final shutdown answers CANCELLED).
  StartExtractions(port, psf_id, 5, &f);
  ASSERT_TRUE(RunningWithQueued(port, f, 4)) << spexd.Log();
  spexd.Signal(SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return spexd.Log().find("\"draining\"") != std::string::npos; }, 10));
  // More signals during the drain change nothing: a Slurm job end sends SIGTERM to every
  // process of the step and the step script sends its own (deploy/slurm). Taken by a thread
  // a library started before main() (OpenBLAS's pool), they used to kill the process (143).
  spexd.Signal(SIGTERM);
  spexd.Signal(SIGINT);
  spexd.Signal(SIGTERM);
  // New work is refused while the old finishes.
  client::ClientOptions o;
  o.target = absl::StrCat("127.0.0.1:", port);
  o.max_attempts = 1;
  o.call_deadline_seconds = 10;
  auto late = client::SpexdClient::Create(o);
  // Refused, never served. gRPC says it two ways: UNAVAILABLE when the call needs a new
  // connection (the listener is closed), CANCELLED when it rides a connection the process
  // already has to this server (channels to one target share it) and the server, shutting
  // down, cancels calls that arrive on it. Which one depends on timing, not on spexd.
  const absl::StatusCode late_code = (*late)->GetServerInfo().status().code();
  EXPECT_TRUE(late_code == absl::StatusCode::kUnavailable ||
              late_code == absl::StatusCode::kCancelled)
      << absl::StatusCodeToString(late_code);
  const int code = spexd.WaitForExit(120);
  for (auto& t : f.threads) t.join();
  EXPECT_EQ(code, 0) << spexd.Log();
  for (std::size_t i = 0; i < f.results.size(); ++i) {
    EXPECT_TRUE(f.results[i].ok()) << i << ": " << f.results[i];
  }
  EXPECT_NE(spexd.Log().find("\"event\":\"drained\""), std::string::npos);
}

// SIGHUP's default action would kill spexd at once, with no drain and no log line (a
// request in flight would get UNAVAILABLE "Socket closed"): it drains as SIGTERM does.
TEST(DrainTest, SighupDrainsLikeSigterm) {
  ASSERT_FALSE(LongFrameBytes().empty());
  SpawnedServer spexd({"--drain_seconds=60"});
  const int port = spexd.WaitForPort(30);
  ASSERT_GT(port, 0) << spexd.Log();
  const std::string psf_id = LoadPsf(port);
  ASSERT_FALSE(psf_id.empty()) << spexd.Log();
  InFlight f;
  StartExtractions(port, psf_id, 2, &f);
  // One running and the other received whole (queued): a request still uploading when
  // the drain starts is refused by design ("refused before it was complete").
  ASSERT_TRUE(RunningWithQueued(port, f, 1)) << spexd.Log();
  spexd.Signal(SIGHUP);
  const int code = spexd.WaitForExit(120);
  for (auto& t : f.threads) t.join();
  EXPECT_EQ(code, 0) << spexd.Log();
  for (std::size_t i = 0; i < f.results.size(); ++i) {
    EXPECT_TRUE(f.results[i].ok()) << i << ": " << f.results[i];
  }
  EXPECT_NE(spexd.Log().find("\"signal\":\"SIGHUP\""), std::string::npos) << spexd.Log();
  EXPECT_NE(spexd.Log().find("\"event\":\"drained\""), std::string::npos) << spexd.Log();
}

// SIGUSR1, SIGUSR2 and SIGALRM would end spexd at once with no log line (their default
// action): they are logged and ignored: the server keeps serving,
// then drains and exits 0 on SIGTERM.
TEST(DrainTest, StraySignalsAreLoggedAndIgnored) {
  SpawnedServer spexd({});
  const int port = spexd.WaitForPort(30);
  ASSERT_GT(port, 0) << spexd.Log();
  for (int sig : {SIGUSR1, SIGUSR2, SIGALRM}) spexd.Signal(sig);
  for (const char* name : {"SIGUSR1", "SIGUSR2", "SIGALRM"}) {
    const std::string line = std::string("\"signal_ignored\",\"signal\":\"") + name + "\"";
    ASSERT_TRUE(WaitFor([&] { return spexd.Log().find(line) != std::string::npos; }, 30))
        << name << "\n" << spexd.Log();
  }
  EXPECT_FALSE(LoadPsf(port).empty()) << spexd.Log();  // still serving
  spexd.Signal(SIGTERM);
  EXPECT_EQ(spexd.WaitForExit(60), 0) << spexd.Log();
}

TEST(DrainTest, WorkPastTheGracePeriodIsCancelledAndTheProcessStillExitsZero) {
  ASSERT_FALSE(LongFrameBytes().empty());
  SpawnedServer spexd({"--drain_seconds=0.2"});
  const int port = spexd.WaitForPort(30);
  ASSERT_GT(port, 0) << spexd.Log();
  const std::string psf_id = LoadPsf(port);
  ASSERT_FALSE(psf_id.empty());
  InFlight f;
  StartExtractions(port, psf_id, 4, &f);
  ASSERT_TRUE(WaitFor([&] { return f.started.load() >= 1; }, 60)) << spexd.Log();
  const auto t0 = Clock::now();
  spexd.Signal(SIGTERM);
  const int code = spexd.WaitForExit(60);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& t : f.threads) t.join();
  EXPECT_EQ(code, 0) << spexd.Log();
  // Stopped at a bundle boundary, long before four frames' worth of work.
  EXPECT_LT(seconds, 5.0) << spexd.Log();
  int failed = 0;
  for (const absl::Status& s : f.results) failed += s.ok() ? 0 : 1;
  EXPECT_GE(failed, 1);
}

}  // namespace
}  // namespace spexd::testing
