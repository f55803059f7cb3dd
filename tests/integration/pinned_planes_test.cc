// spexd decodes frames into host memory pinned by its GPU workers' PlanePinner, so that
// the CUDA backend uploads them without a host copy. The worker here is the CPU backend
// presented as a float32-taking GPU backend with a recording pinner.
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/backend/backend.h"
#include "core/io/plane_buffer.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

class RecordingPinner : public core::PlaneMemoryPinner {
 public:
  bool Pin(void* data, std::size_t) override {
    absl::MutexLock lock(&mu_);
    pinned_.insert(data);
    return true;
  }
  void Unpin(void* data) override {
    absl::MutexLock lock(&mu_);
    pinned_.erase(data);
  }
  bool IsPinned(const void* data) {
    absl::MutexLock lock(&mu_);
    return pinned_.count(const_cast<void*>(data)) > 0;
  }

 private:
  absl::Mutex mu_;
  std::set<void*> pinned_ ABSL_GUARDED_BY(mu_);
};

struct Seen {
  std::atomic<int> frames{0}, float32{0}, pinned{0};
};

class PinnedPlaneBackend : public core::Backend, public core::GpuCapabilities {
 public:
  PinnedPlaneBackend(std::shared_ptr<RecordingPinner> pinner, std::shared_ptr<Seen> seen)
      : pinner_(std::move(pinner)), seen_(std::move(seen)), inner_(*core::CreateBackend(core::BackendOptions{})) {}
  std::string name() const override { return "pinning-fake"; }
  core::GpuCapabilities* gpu() override { return this; }
  bool TakesFloat32Planes() const override { return true; }
  std::shared_ptr<core::PlaneMemoryPinner> PlanePinner() override { return pinner_; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    const core::PreprocImage& in = *job.image;
    seen_->frames++;
    if (in.has_float32_planes()) {
      seen_->float32++;
      if (pinner_->IsPinned(in.image32.data()) && pinner_->IsPinned(in.ivar32.data())) seen_->pinned++;
    }
    core::PreprocImage wide = in;
    core::WidenPlanes(&wide);
    core::ExtractionJob j = job;
    j.image = &wide;
    return inner_->Extract(j, sink);
  }

 private:
  std::shared_ptr<RecordingPinner> pinner_;
  std::shared_ptr<Seen> seen_;
  std::unique_ptr<core::Backend> inner_;
};

void ExtractTwice(const std::shared_ptr<Seen>& seen) {
  auto pinner = std::make_shared<RecordingPinner>();
  server::ServerOptions o = TestServerOptions();
  o.workers.backend_factory = [pinner, seen](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    *reason = "test: a pinning float32 backend";
    std::vector<std::unique_ptr<core::Backend>> made;
    made.push_back(std::make_unique<PinnedPlaneBackend>(pinner, seen));
    return made;
  };
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  for (const std::string& path : {Inputs().frame_path, Inputs().frame_gz_path}) {
    v1::ExtractHeader h = SmallHeader(psf->id());
    h.set_server_path(path);
    auto frame = RemoteExtractFrame(*c, h, nullptr);
    ASSERT_TRUE(frame.ok()) << path << ": " << frame.status();
  }
}

TEST(PinnedPlanesTest, FramesAreDecodedIntoPinnedPlanes) {
  auto seen = std::make_shared<Seen>();
  ExtractTwice(seen);
  EXPECT_EQ(seen->frames.load(), 2);
  EXPECT_EQ(seen->float32.load(), 2);
  EXPECT_EQ(seen->pinned.load(), 2) << ".fits and .fits.gz planes both pinned";
}

}  // namespace
}  // namespace spexd::testing
