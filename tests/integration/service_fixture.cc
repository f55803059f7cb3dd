#include "tests/integration/service_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <grpcpp/create_channel.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "server/platform/metrics.h"
#include "client/spexctl/remote_frame.h"
#include "core/backend/extract_frame.h"
#include "core/plan/geometry.h"
#include "core/io/internal/gzip.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/base/status_macros.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {

core::ExtractionParams SmallParams() {
  core::ExtractionParams p;
  p.has_wavelength = true;
  p.wmin = 5760.0;
  p.wmax = 5800.0;
  p.dw = 0.8;
  p.specmin = 0;
  p.nspec = 50;
  return p;
}

const TestInputs& Inputs() {
  static const TestInputs* inputs = [] {
    auto* in = new TestInputs;
    in->psf_bytes = ReadBytes(BundledPsfPath());
    in->data_dir = MakeTempDir();
    in->output_dir = MakeTempDir();
    in->psf_path = in->data_dir + "/psf.fits";
    in->psf_copy = in->psf_path;
    WriteBytes(in->psf_path, in->psf_bytes);
    auto psf = core::Psf::Load(in->psf_path);
    if (!psf.ok()) {
      ADD_FAILURE() << psf.status();
      return in;
    }
    auto frame = MakeSyntheticPreproc(*psf, SyntheticFrameOptions{});
    if (!frame.ok()) {
      ADD_FAILURE() << frame.status();
      return in;
    }
    in->frame_bytes = *frame;
    in->frame_path = in->data_dir + "/frame.fits";
    WriteBytes(in->frame_path, in->frame_bytes);
    auto frame_gz = core::GzipCompress(in->frame_bytes);
    auto psf_gz = core::GzipCompress(in->psf_bytes);
    if (!frame_gz.ok() || !psf_gz.ok()) {
      ADD_FAILURE() << "gzip: " << frame_gz.status() << " " << psf_gz.status();
      return in;
    }
    in->frame_gz_bytes = *frame_gz;
    in->frame_gz_path = in->data_dir + "/frame.fits.gz";
    WriteBytes(in->frame_gz_path, in->frame_gz_bytes);
    in->psf_gz_bytes = *psf_gz;
    in->psf_gz_path = in->data_dir + "/psf.fits.gz";
    WriteBytes(in->psf_gz_path, in->psf_gz_bytes);
    return in;
  }();
  return *inputs;
}

absl::StatusOr<core::Frame> LocalExtract(const std::string& psf_path, const std::string& frame_path,
                                         const core::ExtractionParams& params) {
  SPEXD_ASSIGN_OR_RETURN(core::Psf psf_value, core::Psf::Load(psf_path));
  auto psf = std::make_shared<const core::Psf>(std::move(psf_value));
  core::PreprocOptions popts;
  popts.mask_policy = params.mask_policy;
  SPEXD_ASSIGN_OR_RETURN(core::PreprocImage image, core::ReadPreproc(frame_path, popts));
  SPEXD_ASSIGN_OR_RETURN(auto geometry, core::Geometry::Create(psf, params, image.height,
                                                               image.width, false));
  core::BackendOptions bopts;
  SPEXD_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> backend, core::CreateBackend(bopts));
  core::ExtractionJob job;
  job.geometry = geometry;
  job.image = &image;
  job.regularize = params.regularize;
  job.psferr = core::EffectivePsfErr(params, *psf);
  job.want_model = params.want_model;
  return core::ExtractFrame(*backend, job);
}

SlowBackend::SlowBackend(std::unique_ptr<core::Backend> inner, double seconds_per_bundle)
    : inner_(std::move(inner)), seconds_per_bundle_(seconds_per_bundle) {}

absl::StatusOr<core::ExtractionSummary> SlowBackend::Extract(const core::ExtractionJob& job,
                                                             const core::BundleSink& sink) {
  return inner_->Extract(job, [&](core::BundleResult&& b) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_per_bundle_));
    bundles_done_->fetch_add(1);
    return sink(std::move(b));
  });
}

server::ServerOptions TestServerOptions() {
  server::ServerOptions o;
  o.network.listen = "127.0.0.1:0";
  // No metrics endpoint unless a test asks (one port less per short-lived test server).
  o.network.metrics_listen.clear();
  o.storage.data_roots = {Inputs().data_dir};
  o.storage.output_roots = {Inputs().output_dir};
  o.workers.backend = core::BackendKind::kCpu;
  o.scheduling.max_queue = 16;
  // Shadow parity off unless a test asks: its checks would make runs differ.
  o.shadow_parity.fraction = 0;
  return o;
}

std::unique_ptr<server::SpexdServer> StartServer(server::ServerOptions options) {
  auto server = server::SpexdServer::Start(std::move(options));
  if (!server.ok()) {
    ADD_FAILURE() << server.status();
    return nullptr;
  }
  absl::Status warm = (*server)->WaitForWarmUp(absl::Seconds(60));
  if (!warm.ok()) ADD_FAILURE() << warm;
  return *std::move(server);
}

std::unique_ptr<client::SpexdClient> Connect(const server::SpexdServer& server,
                                             client::ClientOptions options) {
  options.target = absl::StrCat("127.0.0.1:", server.port());
  if (options.call_deadline_seconds > 30) options.call_deadline_seconds = 30;
  if (options.extract_deadline_seconds == 0) options.extract_deadline_seconds = 120;
  auto client = client::SpexdClient::Create(options);
  if (!client.ok()) {
    ADD_FAILURE() << client.status();
    return nullptr;
  }
  return *std::move(client);
}

v1::ExtractHeader SmallHeader(const std::string& psf_id) {
  const core::ExtractionParams p = SmallParams();
  v1::ExtractHeader h;
  h.set_psf_id(psf_id);
  v1::ExtractionParams* params = h.mutable_params();
  params->set_wmin(p.wmin);
  params->set_wmax(p.wmax);
  params->set_dw(p.dw);
  params->set_specmin(p.specmin);
  params->set_nspec(p.nspec);
  return h;
}

absl::StatusOr<core::Frame> RemoteExtractFrame(client::SpexdClient& client,
                                               const v1::ExtractHeader& header,
                                               const std::string* upload, bool subset) {
  client::RemoteFrameBuilder builder;
  client::ExtractCallbacks cb;
  cb.on_header = [&](const v1::FrameHeader& h) { return builder.OnHeader(h); };
  cb.on_bundle = [&](v1::BundleData&& part) { return builder.OnBundle(std::move(part)); };
  cb.on_model = [&](const v1::ModelChunk& c) { return builder.OnModel(c); };
  SPEXD_RETURN_IF_ERROR(client.Extract(header, upload, subset, cb));
  return builder.Finish();
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (::send(fd, request.data(), request.size(), 0) < 0) {
    ::close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string response;
  char buf[16384];
  for (int i = 0; i < 100000; ++i) {  // bounded: at most ~1.6 GB
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const std::size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return absl::DataLossError("no HTTP header end");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.find(" 200") == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("HTTP: ", status_line));
  }
  return response.substr(body + 4);
}

void ExpectFramesIdentical(const core::Frame& a, const core::Frame& b) {
  EXPECT_EQ(a.specmin, b.specmin);
  EXPECT_EQ(a.nspec, b.nspec);
  EXPECT_EQ(a.nwave, b.nwave);
  EXPECT_EQ(a.ndiag, b.ndiag);
  // operator== on vector<double> compares values; memcmp also catches -0.0 vs 0.0 and
  // NaN payloads: the streamed values must be the very same bits.
  auto same_bits = [](const auto& x, const auto& y) {
    return x.size() == y.size() &&
           (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
  };
  EXPECT_TRUE(same_bits(a.wave, b.wave));
  EXPECT_TRUE(same_bits(a.flux, b.flux));
  EXPECT_TRUE(same_bits(a.ivar, b.ivar));
  EXPECT_TRUE(same_bits(a.rdiags, b.rdiags));
  EXPECT_TRUE(same_bits(a.pixmask_fraction, b.pixmask_fraction));
  EXPECT_TRUE(same_bits(a.chi2pix, b.chi2pix));
  EXPECT_TRUE(same_bits(a.mask, b.mask));
  EXPECT_TRUE(same_bits(a.failed_bins, b.failed_bins));
  EXPECT_TRUE(same_bits(a.model, b.model));
  EXPECT_EQ(a.counts.extracted, b.counts.extracted);
  EXPECT_EQ(a.counts.skipped, b.counts.skipped);
  EXPECT_EQ(a.counts.retried, b.counts.retried);
  EXPECT_EQ(a.counts.failed, b.counts.failed);
}

bool WaitFor(const std::function<bool()>& done, double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

double MetricValue(server::SpexdServer& s, const std::string& series) {
  return SeriesValue(s.metrics().Serialize(), series);
}

double SeriesValue(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.size() > series.size() && line.substr(0, series.size()) == series &&
        line[series.size()] == ' ') {
      return std::strtod(std::string(line.substr(series.size() + 1)).c_str(), nullptr);
    }
  }
  return -1;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

v1::ExtractHeader TenBundleHeader(const std::string& psf_id) {
  v1::ExtractHeader h = SmallHeader(psf_id);
  h.mutable_params()->set_bundlesize(5);
  h.mutable_params()->set_nsubbundles(1);
  return h;
}

bool WorkerIdle(client::SpexdClient& c) {
  auto info = c.GetServerInfo();
  return info.ok() && info->workers_size() == 1 && !info->workers(0).busy();
}

std::shared_ptr<grpc::Channel> Channel(const server::SpexdServer& s) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", s.port()),
                             grpc::InsecureChannelCredentials());
}

void ExpectSameFitsContents(const std::string& a, const std::string& b, const std::string& what) {
  ASSERT_FALSE(a.empty()) << what;
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_EQ(a.size() % 2880, 0u) << what;
  int checksum_cards = 0;
  for (std::size_t off = 0; off < a.size(); off += 80) {
    if (a.compare(off, 80, b, off, 80) == 0) continue;
    const std::string ka = a.substr(off, 8), kb = b.substr(off, 8);
    const bool checksum = (ka == "CHECKSUM" || ka == "DATASUM ") && ka == kb;
    ASSERT_TRUE(checksum) << what << ": files differ at byte " << off << ":\n  "
                          << a.substr(off, 80) << "\n  " << b.substr(off, 80);
    ++checksum_cards;
  }
  EXPECT_LE(checksum_cards, 2 * 8) << what;  // at most both cards of each HDU
}

void ExpectSameFitsBytes(const std::string& a_path, const std::string& b_path) {
  ExpectSameFitsContents(ReadBytes(a_path), ReadBytes(b_path), a_path + " vs " + b_path);
}

}  // namespace spexd::testing
