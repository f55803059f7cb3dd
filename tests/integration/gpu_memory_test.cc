// Device memory through the service, with a fake device backend (the CPU backend plus a
// made-up device ledger): ListPsfs attributes each backend's per-geometry bytes to the
// PSF, spexd_gpu_memory_bytes sums them per device, and a PSF leaving the cache (UnloadPsf
// or eviction) is released in every worker's backend. The real CUDA accounting is tested
// in tests/cuda/host/cuda_memory_test.cc.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/backend/backend.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "server/platform/metrics.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

constexpr int64_t kWorkspaceBytes = 1000;
constexpr int64_t kGeometryBytes = 4096;

// What the fake backends of one server saw (shared with the test).
struct Ledger {
  std::mutex mu;
  std::vector<const core::Geometry*> warmed;          // geometries extracted, any worker
  std::vector<std::vector<const core::Geometry*>> released;  // per worker
};

// The CPU backend, pretending to keep kGeometryBytes of device memory per geometry it
// extracted (until Release) plus a workspace on device `device`.
class FakeDeviceBackend : public core::Backend {
 public:
  FakeDeviceBackend(int worker, int device, std::shared_ptr<Ledger> ledger)
      : worker_(worker), device_(device), ledger_(std::move(ledger)) {
    inner_ = *core::CreateBackend(core::BackendOptions{});
  }
  std::string name() const override { return "fake-gpu"; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    auto out = inner_->Extract(job, sink);
    std::lock_guard<std::mutex> lock(ledger_->mu);
    ledger_->warmed.push_back(job.geometry.get());
    warm_.push_back(job.geometry);
    return out;
  }
  core::BackendMemory Memory() const override {
    core::BackendMemory m;
    m.device = device_;
    m.device_bytes = kWorkspaceBytes;
    std::lock_guard<std::mutex> lock(ledger_->mu);
    for (const auto& w : warm_) {
      if (auto g = w.lock()) {
        m.geometry_bytes[g.get()] += kGeometryBytes;
        m.device_bytes += kGeometryBytes;
      }
    }
    return m;
  }
  void Release(const std::shared_ptr<const core::Geometry>& geometry) override {
    std::lock_guard<std::mutex> lock(ledger_->mu);
    ledger_->released[static_cast<std::size_t>(worker_)].push_back(geometry.get());
    warm_.erase(std::remove_if(warm_.begin(), warm_.end(),
                               [&](const std::weak_ptr<const core::Geometry>& w) {
                                 return w.lock() == geometry;
                               }),
                warm_.end());
  }

 private:
  int worker_, device_;
  std::shared_ptr<Ledger> ledger_;
  std::unique_ptr<core::Backend> inner_;
  std::vector<std::weak_ptr<const core::Geometry>> warm_;  // guarded by ledger_->mu
};

// Two workers on device 0 (so the gauge sums them).
std::unique_ptr<server::SpexdServer> StartFakeDeviceServer(const std::shared_ptr<Ledger>& ledger,
                                                           int64_t cache_bytes = 0) {
  server::ServerOptions o = TestServerOptions();
  o.network.metrics_listen = "127.0.0.1:0";
  if (cache_bytes > 0) o.storage.psf_cache_bytes = cache_bytes;
  ledger->released.resize(2);
  o.workers.backend_factory = [ledger](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    std::vector<std::unique_ptr<core::Backend>> out;
    for (int w = 0; w < 2; ++w) out.push_back(std::make_unique<FakeDeviceBackend>(w, 0, ledger));
    *reason = "test: fake device";
    return out;
  };
  return StartServer(o);
}

std::string GaugeLine(int64_t bytes) {
  return absl::StrCat("spexd_gpu_memory_bytes{device=\"0\"} ", bytes, "\n");
}

TEST(GpuMemoryTest, ListPsfsAndMetricsReportDeviceMemoryAndUnloadReleasesIt) {
  auto ledger = std::make_shared<Ledger>();
  auto server = StartFakeDeviceServer(ledger);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  EXPECT_EQ(psf->gpu_bytes(), 0);
  ASSERT_TRUE(RemoteExtractFrame(*c, SmallHeader(psf->id()), &Inputs().frame_bytes).ok());
  const core::Geometry* geometry = nullptr;
  {
    std::lock_guard<std::mutex> lock(ledger->mu);
    ASSERT_EQ(ledger->warmed.size(), 1u);
    geometry = ledger->warmed[0];
  }
  auto list = c->ListPsfs();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->psfs_size(), 1);
  EXPECT_EQ(list->psfs(0).gpu_bytes(), kGeometryBytes);
  EXPECT_GT(list->psfs(0).host_bytes(), 0);
  // Two workspaces and one warm geometry on device 0 (the monitor publishes every second).
  const std::string busy = GaugeLine(2 * kWorkspaceBytes + kGeometryBytes);
  EXPECT_TRUE(WaitFor(
      [&] { return server->metrics().Serialize().find(busy) != std::string::npos; }, 5))
      << busy << server->metrics().Serialize();

  ASSERT_TRUE(c->UnloadPsf(psf->id()).ok());
  {
    std::lock_guard<std::mutex> lock(ledger->mu);
    for (int w = 0; w < 2; ++w) {  // every worker is told, not only the one that extracted
      EXPECT_EQ(ledger->released[w], std::vector<const core::Geometry*>{geometry}) << "worker " << w;
    }
  }
  EXPECT_EQ(c->ListPsfs()->psfs_size(), 0);
  const std::string idle = GaugeLine(2 * kWorkspaceBytes);
  EXPECT_TRUE(WaitFor(
      [&] { return server->metrics().Serialize().find(idle) != std::string::npos; }, 5))
      << idle << server->metrics().Serialize();
}

TEST(GpuMemoryTest, EvictionReleasesTheGeometryInEveryWorker) {
  auto probe = core::Psf::LoadFromMemory(Inputs().psf_bytes.data(), Inputs().psf_bytes.size(), "probe");
  ASSERT_TRUE(probe.ok());
  auto ledger = std::make_shared<Ledger>();
  // Room for two PSFs and their small geometries: a third evicts the least recently used.
  auto server = StartFakeDeviceServer(ledger, static_cast<int64_t>(probe->MemoryBytes() * 5 / 2));
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto first = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(RemoteExtractFrame(*c, SmallHeader(first->id()), &Inputs().frame_bytes).ok());
  const core::Geometry* geometry = nullptr;
  {
    std::lock_guard<std::mutex> lock(ledger->mu);
    ASSERT_EQ(ledger->warmed.size(), 1u);
    geometry = ledger->warmed[0];
  }
  // Byte-different copies of the same PSF (a trailing blank FITS block).
  for (int k = 1; k < 3; ++k) {
    ASSERT_TRUE(c->LoadPsfFromBytes(Inputs().psf_bytes + std::string(2880 * k, ' '),
                                    absl::StrCat("copy", k))
                    .ok());
  }
  auto list = c->ListPsfs();
  ASSERT_TRUE(list.ok());
  for (const auto& p : list->psfs()) EXPECT_NE(p.id(), first->id());
  std::lock_guard<std::mutex> lock(ledger->mu);
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(ledger->released[w], std::vector<const core::Geometry*>{geometry}) << "worker " << w;
  }
}

}  // namespace
}  // namespace spexd::testing
