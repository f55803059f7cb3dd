// CUDA regions through the service without a GPU: refusals with the CPU
// backend, and the whole request path (registration, region input, results written in
// the documented output layout, release on unregister, cancel and drain, metrics) with a
// fake device backend whose "device memory" is host memory of this process. The real
// CUDA IPC path runs on the GPU machine (examples/cuda_handoff.cc,
// tests/integration/cuda_handoff_test.sh).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/frame/output_layout.h"
#include "core/io/preproc.h"
#include "gtest/gtest.h"
#include "server/platform/metrics.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

constexpr int kFakeDevice = 0;

// "Device memory" of the fake backend: the handle's first 8 bytes are a host address
// in this process.
class HostRegion final : public core::ImportedRegion {
 public:
  HostRegion(void* base, uint64_t size) : base_(base), size_(size) {}
  int device() const override { return kFakeDevice; }
  uint64_t size() const override { return size_; }
  void* data() const override { return base_; }
  absl::Status WriteFromHost(uint64_t offset, const void* src, std::size_t bytes) override {
    if (offset > size_ || bytes > size_ - offset) return absl::OutOfRangeError("past the region");
    std::memcpy(static_cast<unsigned char*>(base_) + offset, src, bytes);
    return absl::OkStatus();
  }

 private:
  void* base_;
  uint64_t size_;
};

std::string HandleFor(const void* p) {
  std::string handle(core::kCudaIpcHandleBytes, '\0');
  std::memcpy(handle.data(), &p, sizeof(p));
  return handle;
}

// The CPU backend on a made-up device that "imports" host memory: a device frame is
// read back into a PreprocImage with core's pixel rules, as the CUDA kernel does.
class HostDeviceBackend : public core::Backend, public core::GpuCapabilities {
 public:
  HostDeviceBackend() : inner_(*core::CreateBackend(core::BackendOptions{})) {}
  std::string name() const override { return "fake-gpu"; }
  core::GpuCapabilities* gpu() override { return this; }
  core::BackendMemory Memory() const override {
    core::BackendMemory m;
    m.device = kFakeDevice;
    return m;
  }
  absl::StatusOr<std::unique_ptr<core::ImportedRegion>> ImportRegion(const std::string& handle,
                                                                     int device,
                                                                     uint64_t size) override {
    if (device != kFakeDevice) return absl::FailedPreconditionError("not this device");
    void* base = nullptr;
    std::memcpy(&base, handle.data(), sizeof(base));
    if (base == nullptr) return absl::FailedPreconditionError("stale handle");
    return std::unique_ptr<core::ImportedRegion>(new HostRegion(base, size));
  }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    if (job.device_image == nullptr) return inner_->Extract(job, sink);
    const core::DeviceImageInput& in = *job.device_image;
    core::PreprocImage frame = *job.image;
    const std::size_t n = static_cast<std::size_t>(frame.height) * frame.width;
    frame.image.resize(n);
    frame.ivar.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (in.type == core::DevicePixelType::kFloat64) {
        frame.image[i] = static_cast<const double*>(in.image)[i];
        frame.ivar[i] = static_cast<const double*>(in.ivar)[i];
      } else {
        frame.image[i] = static_cast<const float*>(in.image)[i];
        frame.ivar[i] = static_cast<const float*>(in.ivar)[i];
      }
    }
    core::ApplyPixelRules(static_cast<const uint16_t*>(in.mask), in.mask_policy, &frame);
    core::ExtractionJob host = job;
    host.image = &frame;
    host.device_image = nullptr;
    return inner_->Extract(host, sink);
  }

 private:
  std::unique_ptr<core::Backend> inner_;
};

std::unique_ptr<server::SpexdServer> StartHostDeviceServer() {
  server::ServerOptions o = TestServerOptions();
  o.workers.backend_factory = [](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<HostDeviceBackend>());
    *reason = "test: host memory as device memory";
    return out;
  };
  return StartServer(o);
}

v1::RegisterCudaRegionRequest RegionRequest(const void* base, uint64_t size, int device = kFakeDevice) {
  v1::RegisterCudaRegionRequest r;
  r.set_name("test-region");
  r.set_ipc_handle(HandleFor(base));
  r.set_device(device);
  r.set_size(static_cast<int64_t>(size));
  return r;
}

// The test frame's planes as float64 (rules applied; applying them again changes
// nothing), laid out in one "allocation": image, then ivar.
struct DeviceFrame {
  int height = 0, width = 0;
  std::vector<double> memory;  // [2][height][width]
  uint64_t bytes() const { return memory.size() * sizeof(double); }
  uint64_t ivar_offset() const { return static_cast<uint64_t>(height) * width * sizeof(double); }
};

DeviceFrame LoadDeviceFrame() {
  auto pre = core::ReadPreproc(Inputs().frame_path, core::PreprocOptions{});
  EXPECT_TRUE(pre.ok()) << pre.status();
  DeviceFrame f;
  if (!pre.ok()) return f;
  f.height = pre->height;
  f.width = pre->width;
  f.memory = pre->image;
  f.memory.insert(f.memory.end(), pre->ivar.begin(), pre->ivar.end());
  return f;
}

v1::ExtractHeader RegionHeader(const std::string& psf_id, const DeviceFrame& f, const std::string& in_id,
                               const std::string& out_id) {
  v1::ExtractHeader h = SmallHeader(psf_id);
  v1::CudaImage* ci = h.mutable_cuda_image();
  ci->mutable_image()->set_region_id(in_id);
  ci->mutable_image()->set_offset(0);
  ci->mutable_ivar()->set_region_id(in_id);
  ci->mutable_ivar()->set_offset(static_cast<int64_t>(f.ivar_offset()));
  ci->set_height(f.height);
  ci->set_width(f.width);
  ci->set_pixel_type(v1::FLOAT64);
  if (!out_id.empty()) h.mutable_cuda_output()->mutable_region()->set_region_id(out_id);
  return h;
}

// Runs an extraction and returns the stream's messages (header, completions, summary).
struct StreamSeen {
  v1::FrameHeader header;
  std::vector<v1::BundleData> bundles;
  v1::ExtractSummary summary;
};
absl::StatusOr<StreamSeen> RunExtract(client::SpexdClient& client, const v1::ExtractHeader& h) {
  StreamSeen seen;
  client::ExtractCallbacks cb;
  cb.on_header = [&](const v1::FrameHeader& fh) {
    seen.header = fh;
    return absl::OkStatus();
  };
  cb.on_bundle = [&](v1::BundleData&& b) {
    seen.bundles.push_back(std::move(b));
    return absl::OkStatus();
  };
  cb.on_summary = [&](const v1::ExtractSummary& s) { seen.summary = s; };
  absl::Status s = client.Extract(h, nullptr, false, cb);
  if (!s.ok()) return s;
  return seen;
}

template <typename T>
bool SameBits(const T* a, const std::vector<T>& b) {
  return std::memcmp(a, b.data(), b.size() * sizeof(T)) == 0;
}

TEST(CudaRegionRefusalTest, CpuBackendRefusesRegistrationWithFailedPrecondition) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  std::vector<double> memory(16);
  auto lease = client->RegisterCudaRegion(RegionRequest(memory.data(), 128));
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kFailedPrecondition) << lease.status();
  EXPECT_NE(lease.status().message().find("cpu backend cannot use CUDA regions"), std::string::npos)
      << lease.status();
}

TEST(CudaRegionRefusalTest, MalformedRegistrationsAreInvalidArgument) {
  auto server = StartServer(TestServerOptions());
  auto client = Connect(*server);
  std::vector<double> memory(16);
  v1::RegisterCudaRegionRequest short_handle = RegionRequest(memory.data(), 128);
  short_handle.set_ipc_handle("abc");
  v1::RegisterCudaRegionRequest no_size = RegionRequest(memory.data(), 0);
  v1::RegisterCudaRegionRequest no_name = RegionRequest(memory.data(), 128);
  no_name.clear_name();
  for (const auto& r : {short_handle, no_size, no_name}) {
    auto lease = client->RegisterCudaRegion(r);
    ASSERT_FALSE(lease.ok());
    EXPECT_EQ(lease.status().code(), absl::StatusCode::kInvalidArgument) << lease.status();
  }
}

TEST(CudaRegionRefusalTest, ExtractionNamingAnUnknownRegionIsFailedPrecondition) {
  auto server = StartServer(TestServerOptions());
  auto client = Connect(*server);
  auto psf = client->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  DeviceFrame f;
  f.height = 100;
  f.width = 100;
  auto run = RunExtract(*client, RegionHeader(psf->id(), f, "no-such-region", ""));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  // And a path request with an unknown output region.
  v1::ExtractHeader h = SmallHeader(psf->id());
  h.set_server_path(Inputs().frame_path);
  h.mutable_cuda_output()->mutable_region()->set_region_id("no-such-region");
  run = RunExtract(*client, h);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
}

// An IPv4 address of this host that is not loopback, or "" when there is none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    char text[INET_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) continue;
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST(CudaRegionRefusalTest, RemotePeersArePermissionDeniedUnlessAuthenticated) {
  const std::string address = NonLoopbackAddress();
  if (address.empty()) GTEST_SKIP() << "no non-loopback IPv4 address on this host";
  std::vector<double> memory(16);
  for (const bool with_token : {false, true}) {
    server::ServerOptions o = TestServerOptions();
    o.network.listen = "0.0.0.0:0";
    if (with_token) o.security.auth_token = "region-test-token";
    auto server = StartServer(o);
    ASSERT_NE(server, nullptr);
    client::ClientOptions co;
    co.target = absl::StrCat(address, ":", server->port());
    if (with_token) co.bearer_token = "region-test-token";
    auto client = client::SpexdClient::Create(co);
    ASSERT_TRUE(client.ok()) << client.status();
    auto lease = (*client)->RegisterCudaRegion(RegionRequest(memory.data(), 128));
    ASSERT_FALSE(lease.ok());
    // The token lets the call past the peer check, to the CPU backend's refusal.
    EXPECT_EQ(lease.status().code(), with_token ? absl::StatusCode::kFailedPrecondition
                                                : absl::StatusCode::kPermissionDenied)
        << lease.status();
  }
}

class CudaRegionServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartHostDeviceServer();
    ASSERT_NE(server_, nullptr);
    client_ = Connect(*server_);
    auto psf = client_->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
    frame_ = LoadDeviceFrame();
  }
  std::string Metrics() { return server_->metrics().Serialize(); }

  std::unique_ptr<server::SpexdServer> server_;
  std::unique_ptr<client::SpexdClient> client_;
  std::string psf_id_;
  DeviceFrame frame_;
};

TEST_F(CudaRegionServiceTest, RegionInputAndOutputEqualPathExtractionBitForBit) {
  v1::ExtractHeader path = SmallHeader(psf_id_);
  path.set_server_path(Inputs().frame_path);
  auto reference = RemoteExtractFrame(*client_, path, nullptr);
  ASSERT_TRUE(reference.ok()) << reference.status();

  auto in = client_->RegisterCudaRegion(RegionRequest(frame_.memory.data(), frame_.bytes()));
  ASSERT_TRUE(in.ok()) << in.status();
  const core::OutputLayout layout =
      core::MakeOutputLayout(reference->nspec, reference->nwave, reference->ndiag);
  // Filled with a pattern, so that sections the server leaves alone would show.
  std::vector<unsigned char> out(layout.total_bytes, 0xA5);
  auto out_lease = client_->RegisterCudaRegion(RegionRequest(out.data(), out.size()));
  ASSERT_TRUE(out_lease.ok()) << out_lease.status();

  auto run = RunExtract(*client_, RegionHeader(psf_id_, frame_, (*in)->id(), (*out_lease)->id()));
  ASSERT_TRUE(run.ok()) << run.status();
  // Only completions on the stream: indices, counts, no arrays.
  ASSERT_EQ(run->bundles.size(), 2u);
  for (const v1::BundleData& b : run->bundles) {
    EXPECT_TRUE(b.last_part());
    EXPECT_EQ(b.flux_size() + b.ivar_size() + b.resolution_size() + b.chi2pix_size(), 0);
    EXPECT_GT(b.counts().extracted(), 0);
  }
  EXPECT_EQ(run->summary.nbundles(), 2);
  EXPECT_EQ(run->header.image_header_size(), 0);

  const unsigned char* base = out.data();
  EXPECT_TRUE(SameBits(reinterpret_cast<const double*>(base + layout.flux), reference->flux));
  EXPECT_TRUE(SameBits(reinterpret_cast<const double*>(base + layout.ivar), reference->ivar));
  EXPECT_TRUE(SameBits(reinterpret_cast<const uint32_t*>(base + layout.mask), reference->mask));
  EXPECT_TRUE(SameBits(reinterpret_cast<const double*>(base + layout.resolution), reference->rdiags));
  EXPECT_TRUE(SameBits(reinterpret_cast<const double*>(base + layout.chi2pix), reference->chi2pix));
  double flux_sum = 0;
  for (double v : reference->flux) flux_sum += v;
  EXPECT_GT(flux_sum, 0);  // not a trivial frame

  const std::string metrics = Metrics();
  EXPECT_EQ(SeriesValue(metrics, "spexd_cuda_regions"), 2) << metrics;
  EXPECT_EQ(SeriesValue(metrics, "spexd_cuda_region_bytes"),
            static_cast<double>(frame_.bytes() + out.size()));
  EXPECT_EQ(SeriesValue(metrics, "spexd_handoff_bytes_total{direction=\"in\"}"),
            static_cast<double>(frame_.bytes()));
  // Every row of the plan: flux, ivar, chi2pix, the diagonals (float64) and the mask.
  EXPECT_EQ(SeriesValue(metrics, "spexd_handoff_bytes_total{direction=\"out\"}"),
            static_cast<double>(layout.bins() * (3 * 8 + layout.ndiags() * 8 + 4)));

  ASSERT_TRUE((*in)->Release().ok());
  ASSERT_TRUE((*out_lease)->Release().ok());
  EXPECT_EQ(SeriesValue(Metrics(), "spexd_cuda_regions"), 0);
  // Released: the same ids are refused now.
  auto again = RunExtract(*client_, RegionHeader(psf_id_, frame_, (*in)->id(), ""));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  EXPECT_EQ(client_->UnregisterCudaRegion((*in)->id()).code(), absl::StatusCode::kNotFound);
}

TEST_F(CudaRegionServiceTest, RegionsTooSmallOrOnAnotherDeviceAreFailedPrecondition) {
  auto other = client_->RegisterCudaRegion(RegionRequest(frame_.memory.data(), frame_.bytes(), 1));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition) << other.status();

  // The image planes do not fit a region registered one byte short.
  auto small_in = client_->RegisterCudaRegion(RegionRequest(frame_.memory.data(), frame_.bytes() - 1));
  ASSERT_TRUE(small_in.ok()) << small_in.status();
  auto run = RunExtract(*client_, RegionHeader(psf_id_, frame_, (*small_in)->id(), ""));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_NE(run.status().message().find("too small"), std::string::npos) << run.status();

  // An output region one alignment unit short of the layout.
  auto in = client_->RegisterCudaRegion(RegionRequest(frame_.memory.data(), frame_.bytes()));
  ASSERT_TRUE(in.ok()) << in.status();
  std::vector<unsigned char> out(4096);
  auto out_lease = client_->RegisterCudaRegion(RegionRequest(out.data(), out.size()));
  ASSERT_TRUE(out_lease.ok()) << out_lease.status();
  run = RunExtract(*client_, RegionHeader(psf_id_, frame_, (*in)->id(), (*out_lease)->id()));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_NE(run.status().message().find("need"), std::string::npos) << run.status();

  // Misaligned offsets are malformed requests.
  v1::ExtractHeader h = RegionHeader(psf_id_, frame_, (*in)->id(), "");
  h.mutable_cuda_image()->mutable_ivar()->set_offset(3);
  run = RunExtract(*client_, h);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument) << run.status();
}

TEST_F(CudaRegionServiceTest, EndingTheRegisterCallReleasesTheRegion) {
  std::string id;
  {
    auto lease = client_->RegisterCudaRegion(RegionRequest(frame_.memory.data(), frame_.bytes()));
    ASSERT_TRUE(lease.ok()) << lease.status();
    id = (*lease)->id();
    EXPECT_EQ(SeriesValue(Metrics(), "spexd_cuda_regions"), 1);
  }  // destroyed without Release: the call is cancelled, as when a producer exits
  EXPECT_TRUE(WaitFor([&] { return SeriesValue(Metrics(), "spexd_cuda_regions") == 0; }, 2));
  auto run = RunExtract(*client_, RegionHeader(psf_id_, frame_, id, ""));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
}

TEST_F(CudaRegionServiceTest, DrainReleasesRegionsAndEndsTheirCalls) {
  auto lease = client_->RegisterCudaRegion(RegionRequest(frame_.memory.data(), frame_.bytes()));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const auto start = std::chrono::steady_clock::now();
  server_->Drain(absl::Seconds(20));
  // The open register call did not hold the drain for its grace period.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(SeriesValue(Metrics(), "spexd_cuda_regions"), 0);
}

}  // namespace
}  // namespace spexd::testing
