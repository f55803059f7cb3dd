// Bursts from a pipeline: a DESI exposure is 30 frames submitted at
// once. The queue bound scales with the workers by default, and the client retries a
// full queue (RESOURCE_EXHAUSTED that the server marks retryable) with jittered backoff
// within its deadline, but never a request over a hard limit.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/backend/backend.h"
#include "gtest/gtest.h"
#include "server/platform/metrics.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST(BurstTest, TheDefaultQueueScalesWithTheWorkers) {
  server::ServerOptions o = TestServerOptions();
  o.scheduling.max_queue = 0;  // the default: automatic
  o.workers.backend_factory = [](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    std::vector<std::unique_ptr<core::Backend>> out;
    for (int i = 0; i < 4; ++i) {
      core::BackendOptions bo;
      bo.threads = 1;
      auto b = core::CreateBackend(bo);
      if (!b.ok()) return b.status();
      out.push_back(*std::move(b));
    }
    *reason = "test: four cpu workers";
    return out;
  };
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto info = Connect(*server)->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->workers_size(), 4);
  // 32 frames at once fit the queue of a 4-worker server (16 before).
  EXPECT_GE(info->limits().max_queue(), 32);
}

TEST(BurstTest, ClientsRetryAFullQueueAndAllFinish) {
  server::ServerOptions o = TestServerOptions();
  o.scheduling.max_queue = 1;
  o.scheduling.max_uploads = 1;
  o.scheduling.realtime_reserve = 0;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto psf = Connect(*server)->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  constexpr int kClients = 6;
  std::vector<absl::Status> results(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      client::ClientOptions co;
      co.extract_deadline_seconds = 60;
      co.initial_backoff_seconds = 0.05;
      co.max_backoff_seconds = 0.5;
      auto c = Connect(*server, co);
      v1::ExtractHeader h = SmallHeader(psf->id());
      h.set_server_path(Inputs().frame_path);
      results[i] = c->Extract(h, nullptr, false, client::ExtractCallbacks{});
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
  // The queue really was full at times: the retries are what let every client finish.
  const std::string metrics = server->metrics().Serialize();
  EXPECT_NE(metrics.find("spexd_requests_total{code=\"RESOURCE_EXHAUSTED\",rpc=\"ExtractFrame\"}"),
            std::string::npos)
      << metrics;
}

TEST(BurstTest, AnUploadOverTheLimitIsNotRetried) {
  server::ServerOptions o = TestServerOptions();
  o.limits.max_upload_bytes = 3 << 19;  // 1.5 MiB: the 1 MB PSF fits
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  client::ClientOptions co;
  co.initial_backoff_seconds = 0.5;
  auto c = Connect(*server, co);
  auto psf = c->LoadPsfFromServerPath(Inputs().psf_path);
  ASSERT_TRUE(psf.ok()) << psf.status();
  const std::string too_big(2 << 20, 'x');  // a hard limit, not a full queue
  const auto t0 = Clock::now();
  absl::Status st = c->Extract(SmallHeader(psf->id()), &too_big, false, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  // Under the 0.5 s backoff, so a retry would fail it; 0.25 s was close on a loaded host.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 0.45);
  const std::string metrics = server->metrics().Serialize();
  EXPECT_NE(metrics.find("spexd_requests_total{code=\"RESOURCE_EXHAUSTED\",rpc=\"ExtractFrame\"} 1"),
            std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace spexd::testing
