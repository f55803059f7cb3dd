// Per-worker work in the metrics: spexd_worker_{frames,patches,busy_seconds}_total
// and spexd_worker_extract_duration_seconds, labelled {worker, gpu}, in the exposition text
// (ServerMetrics::Serialize, what a scrape returns: the HTTP endpoint is MetricsTest's).
// The CPU backend's worker is gpu="cpu"; GPU workers are faked (the CPU backend reporting
// a device, as the server's backend factory sees it) on devices 1 and 3, the subset
// `--gpu_devices 1,3` gives on a 4-GPU node; scripts/gpu_subset_check.sh checks the real
// CUDA workers. Also: spexd refuses a bad --gpu_devices and exits with the reason.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/backend/backend.h"
#include "gtest/gtest.h"
#include "server/platform/metrics.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/spawned_server.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The gpu label values of metric `name`'s series.
std::set<std::string> GpuLabels(const std::string& body, const std::string& name) {
  std::set<std::string> out;
  const std::string prefix = name + "{gpu=\"";
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (line.substr(0, prefix.size()) != prefix) continue;
    line.remove_prefix(prefix.size());
    out.insert(std::string(line.substr(0, line.find('"'))));
  }
  return out;
}

std::string Series(const char* name, const std::string& gpu, int worker) {
  return absl::StrCat(name, "{gpu=\"", gpu, "\",worker=\"", worker, "\"}");
}

std::string Scrape(server::SpexdServer& server) { return server.metrics().Serialize(); }

const char* const kWorkerFamilies[] = {"spexd_worker_frames_total", "spexd_worker_patches_total",
                                       "spexd_worker_busy_seconds_total",
                                       "spexd_worker_extract_duration_seconds_count"};

// What the client saw of one extraction.
struct Extracted {
  absl::Status status;
  int64_t patches = 0;
  double extract_seconds = 0;
};

Extracted Extract(client::SpexdClient& c, const std::string& psf_id) {
  Extracted out;
  client::ExtractCallbacks cb;
  cb.on_header = [](const v1::FrameHeader&) { return absl::OkStatus(); };
  cb.on_bundle = [](v1::BundleData&&) { return absl::OkStatus(); };
  cb.on_model = [](const v1::ModelChunk&) { return absl::OkStatus(); };
  cb.on_summary = [&](const v1::ExtractSummary& s) {
    out.patches = s.counts().extracted();
    out.extract_seconds = s.extract_seconds();
  };
  v1::ExtractHeader h = SmallHeader(psf_id);
  h.set_server_path(Inputs().frame_path);
  out.status = c.Extract(h, nullptr, false, cb);
  return out;
}

TEST(WorkerMetricsTest, CpuWorkerCountsFramesPatchesAndBusyTime) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  // Every series exists at 0 before any work.
  std::string body = Scrape(*server);
  for (const char* family : kWorkerFamilies) {
    EXPECT_EQ(SeriesValue(body, Series(family, "cpu", 0)), 0) << family << "\n" << body;
    EXPECT_EQ(GpuLabels(body, family), std::set<std::string>{"cpu"}) << family;
  }

  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  const Clock::time_point t0 = Clock::now();
  int64_t patches = 0;
  double extract_seconds = 0;
  for (int i = 0; i < 2; ++i) {
    const Extracted e = Extract(*c, psf->id());
    ASSERT_TRUE(e.status.ok()) << e.status;
    patches += e.patches;
    extract_seconds += e.extract_seconds;
  }
  ASSERT_GT(patches, 0);
  // The worker's busy time is added once it is idle again (just after the summary went out).
  ASSERT_TRUE(WaitFor([&] { return server->metrics().Serialize().find(
                                       "spexd_worker_busy{worker=\"0\"} 0") != std::string::npos; },
                      10));
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  body = Scrape(*server);
  EXPECT_EQ(SeriesValue(body, Series("spexd_worker_frames_total", "cpu", 0)), 2) << body;
  EXPECT_EQ(SeriesValue(body, Series("spexd_worker_patches_total", "cpu", 0)),
            static_cast<double>(patches));
  EXPECT_EQ(SeriesValue(body, "spexd_patches_total{outcome=\"extracted\"}"),
            static_cast<double>(patches));
  EXPECT_EQ(SeriesValue(body, Series("spexd_worker_extract_duration_seconds_count", "cpu", 0)), 2);
  // The histogram's sum is the backend time the summaries report (both from the worker's
  // start to the backend's return; measured a few microseconds apart).
  const double sum =
      SeriesValue(body, Series("spexd_worker_extract_duration_seconds_sum", "cpu", 0));
  EXPECT_NEAR(sum, extract_seconds, 0.01 + 0.02 * extract_seconds);
  // Busy covers the backend time and fits in the wall time of the two requests.
  const double busy = SeriesValue(body, Series("spexd_worker_busy_seconds_total", "cpu", 0));
  EXPECT_GE(busy, sum * 0.999) << body;
  EXPECT_LE(busy, wall) << body;
}

// The CPU backend presented as a GPU worker on `device`, counting the frames and patches
// it extracts itself and taking `seconds_per_bundle` longer per bundle.
class CountingDeviceBackend : public core::Backend {
 public:
  CountingDeviceBackend(int device, double seconds_per_bundle)
      : device_(device), seconds_per_bundle_(seconds_per_bundle) {
    inner_ = *core::CreateBackend(core::BackendOptions{});
  }
  std::string name() const override { return "fake-gpu"; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    auto out = inner_->Extract(job, [&](core::BundleResult&& b) {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds_per_bundle_));
      patches_->fetch_add(b.counts.extracted);
      return sink(std::move(b));
    });
    if (out.ok()) frames_->fetch_add(1);
    return out;
  }
  core::BackendMemory Memory() const override {
    core::BackendMemory m;
    m.device = device_;
    return m;
  }

  std::shared_ptr<std::atomic<int64_t>> frames() const { return frames_; }
  std::shared_ptr<std::atomic<int64_t>> patches() const { return patches_; }

 private:
  int device_;
  double seconds_per_bundle_;
  std::unique_ptr<core::Backend> inner_;
  std::shared_ptr<std::atomic<int64_t>> frames_ = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<int64_t>> patches_ = std::make_shared<std::atomic<int64_t>>(0);
};

struct FakeGpus {
  std::vector<int> devices;
  std::vector<std::shared_ptr<std::atomic<int64_t>>> frames, patches;
};

// A server whose workers are fake GPU backends on `gpus->devices`, in that order.
std::unique_ptr<server::SpexdServer> StartFakeGpuServer(FakeGpus* gpus, double seconds_per_bundle) {
  server::ServerOptions o = TestServerOptions();
  o.workers.cpu_threads = 1;  // the fake workers share the machine's cores with the test
  std::vector<std::unique_ptr<core::Backend>> made;
  for (int d : gpus->devices) {
    auto b = std::make_unique<CountingDeviceBackend>(d, seconds_per_bundle);
    gpus->frames.push_back(b->frames());
    gpus->patches.push_back(b->patches());
    made.push_back(std::move(b));
  }
  auto shared = std::make_shared<std::vector<std::unique_ptr<core::Backend>>>(std::move(made));
  o.workers.backend_factory = [shared](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    *reason = "test: fake GPUs";
    return std::move(*shared);
  };
  return StartServer(o);
}

TEST(WorkerMetricsTest, EachGpuWorkerShowsItsOwnWorkUnderItsGpuLabel) {
  FakeGpus gpus;
  gpus.devices = {1, 3};
  auto server = StartFakeGpuServer(&gpus, 0.15);
  ASSERT_NE(server, nullptr);
  std::string body = Scrape(*server);
  for (const char* family : kWorkerFamilies) {
    EXPECT_EQ(GpuLabels(body, family), (std::set<std::string>{"1", "3"})) << family << "\n" << body;
    EXPECT_EQ(SeriesValue(body, Series(family, "1", 0)), 0) << family;
    EXPECT_EQ(SeriesValue(body, Series(family, "3", 1)), 0) << family;
  }

  // Four frames at once on two workers: each takes some (a frame holds its worker 0.3 s).
  constexpr int kFrames = 4;
  std::vector<Extracted> results(kFrames);
  {
    auto c = Connect(*server);
    auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    ASSERT_TRUE(psf.ok()) << psf.status();
    std::vector<std::thread> clients;
    for (int i = 0; i < kFrames; ++i) {
      clients.emplace_back([&, i] {
        auto own = Connect(*server);
        results[i] = Extract(*own, psf->id());
      });
    }
    for (std::thread& t : clients) t.join();
  }
  int64_t patches = 0;
  for (const Extracted& e : results) {
    ASSERT_TRUE(e.status.ok()) << e.status;
    patches += e.patches;
  }
  ASSERT_TRUE(WaitFor([&] {
    const std::string m = server->metrics().Serialize();
    return m.find("spexd_worker_busy{worker=\"0\"} 0") != std::string::npos &&
           m.find("spexd_worker_busy{worker=\"1\"} 0") != std::string::npos;
  }, 10));
  body = Scrape(*server);
  double frames_sum = 0, patches_sum = 0;
  for (int w = 0; w < 2; ++w) {
    const std::string gpu = absl::StrCat(gpus.devices[w]);
    SCOPED_TRACE("worker " + std::to_string(w) + " gpu " + gpu);
    // What the worker's own backend did, under its own labels.
    const double frames = SeriesValue(body, Series("spexd_worker_frames_total", gpu, w));
    EXPECT_EQ(frames, static_cast<double>(gpus.frames[w]->load())) << body;
    EXPECT_EQ(SeriesValue(body, Series("spexd_worker_patches_total", gpu, w)),
              static_cast<double>(gpus.patches[w]->load()));
    EXPECT_EQ(SeriesValue(body, Series("spexd_worker_extract_duration_seconds_count", gpu, w)),
              frames);
    EXPECT_GE(frames, 1) << "each worker should have taken some of the " << kFrames << " frames";
    // Two bundles per frame, each held 0.15 s by the fake backend.
    EXPECT_GE(SeriesValue(body, Series("spexd_worker_busy_seconds_total", gpu, w)), 0.3 * frames);
    frames_sum += frames;
    patches_sum += SeriesValue(body, Series("spexd_worker_patches_total", gpu, w));
  }
  EXPECT_EQ(frames_sum, kFrames);
  EXPECT_EQ(patches_sum, static_cast<double>(patches));
  for (const char* family : kWorkerFamilies) {
    EXPECT_EQ(GpuLabels(body, family), (std::set<std::string>{"1", "3"})) << family;
  }
}

TEST(WorkerMetricsTest, BusySecondsGrowDuringALongJob) {
  FakeGpus gpus;
  gpus.devices = {0};
  auto server = StartFakeGpuServer(&gpus, 1.5);  // two bundles: 3 s on the worker
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  Extracted result;
  std::thread job([&] { result = Extract(*c, psf->id()); });
  // The monitor adds a busy worker's time every second, not only when its job ends.
  ASSERT_TRUE(WaitFor([&] {
    return server->metrics().Serialize().find("spexd_worker_busy{worker=\"0\"} 1") != std::string::npos;
  }, 10));
  const Clock::time_point busy_from = Clock::now();
  double busy = 0;
  const bool grew = WaitFor([&] {
    busy = SeriesValue(server->metrics().Serialize(),
                       Series("spexd_worker_busy_seconds_total", "0", 0));
    return busy >= 1.0;
  }, 2.5);
  const double waited = std::chrono::duration<double>(Clock::now() - busy_from).count();
  const double frames =
      SeriesValue(server->metrics().Serialize(), Series("spexd_worker_frames_total", "0", 0));
  job.join();
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_TRUE(grew) << "busy seconds " << busy << " after " << waited << " s of a 3 s job";
  EXPECT_EQ(frames, 0) << "the frame was counted before its job ended";
}

// spexd refuses a --gpu_devices it cannot honour, and exits with the reason (status 1)
// rather than serve on other devices or stay NOT_SERVING.
void ExpectStartupRefused(const std::vector<std::string>& args, const std::string& reason) {
  SpawnedServer spexd(args);
  EXPECT_EQ(spexd.WaitForExit(60), 1) << spexd.Log();
  const std::string log = spexd.Log();
  EXPECT_NE(log.find("startup_failed"), std::string::npos) << log;
  EXPECT_NE(log.find(reason), std::string::npos) << reason << "\n" << log;
}

TEST(GpuDevicesFlagTest, BadEntriesAreRefused) {
  ExpectStartupRefused({"--gpu_devices=1,x"}, "--gpu_devices: bad device 'x'");
  ExpectStartupRefused({"--gpu_devices=-1"}, "--gpu_devices: bad device '-1'");
}

TEST(GpuDevicesFlagTest, RefusedWithTheCpuBackend) {
  ExpectStartupRefused({"--backend=cpu", "--gpu_devices=0"}, "not with --backend=cpu");
}

TEST(GpuDevicesFlagTest, ADeviceThatIsNotThereStopsTheServer) {
  // Without a GPU: no fall-back to the CPU; with GPUs: device 99 is not one of them.
  SpawnedServer spexd({"--backend=auto", "--gpu_devices=99"});
  EXPECT_EQ(spexd.WaitForExit(60), 1) << spexd.Log();
  const std::string log = spexd.Log();
  const bool no_gpu = log.find("--gpu_devices=99 but no GPU is visible") != std::string::npos;
  const bool missing = log.find("--gpu_devices: device 99 does not exist") != std::string::npos;
  EXPECT_TRUE(no_gpu || missing) << log;
  EXPECT_EQ(log.find("\"event\":\"serving\""), std::string::npos) << log;
}

}  // namespace
}  // namespace spexd::testing
