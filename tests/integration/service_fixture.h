// Shared pieces of the service tests: an in-process spexd on loopback (port 0), a client,
// the synthetic test frame and a local reference extraction of it.
#ifndef SPEXD_TESTS_INTEGRATION_SERVICE_FIXTURE_H_
#define SPEXD_TESTS_INTEGRATION_SERVICE_FIXTURE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include <grpcpp/channel.h>
#include "client/lib/spexd_client.h"
#include "core/backend/backend.h"
#include "core/plan/extraction_params.h"
#include "core/frame/frame.h"
#include "gtest/gtest.h"
#include "server/spexd_server.h"

namespace spexd::testing {

// Polls `done` every 20 ms for up to `seconds`; its last answer.
bool WaitFor(const std::function<bool()>& done, double seconds);
// The value of one metric series in the server's exposition text, -1 when absent.
double MetricValue(server::SpexdServer& s, const std::string& series);
// The value of the line "series value" in exposition text (`series` = the name and its
// labels exactly as serialised), -1 when absent.
double SeriesValue(const std::string& exposition, const std::string& series);
// Seconds since t0 on the steady clock.
double SecondsSince(std::chrono::steady_clock::time_point t0);
// The names in `dir`, sorted.
std::vector<std::string> DirEntries(const std::string& dir);
// An insecure channel to the server's loopback port.
std::shared_ptr<grpc::Channel> Channel(const server::SpexdServer& s);


// The grid and fibres every service test extracts: two bundles of 25 fibres on
// 5760-5800 A (51 bins), so a frame takes a fraction of a second on the CPU backend.
core::ExtractionParams SmallParams();

// The synthetic frame (see tests/synthetic_frames.h) and the bundled PSF, made once per process.
struct TestInputs {
  std::string psf_path;     // data_dir/psf.fits: a copy of the bundled PSF
  std::string psf_bytes;
  std::string frame_bytes;  // preproc FITS
  std::string data_dir;     // a data root holding frame.fits and psf.fits
  std::string frame_path;   // data_dir/frame.fits
  std::string psf_copy;     // the same file (a server-side path)
  std::string output_dir;   // the test servers' output root (--output_roots)
  // The same two files gzip-compressed, as DESI ships them (.fits.gz).
  std::string frame_gz_bytes, frame_gz_path;  // data_dir/frame.fits.gz
  std::string psf_gz_bytes, psf_gz_path;      // data_dir/psf.fits.gz
};
const TestInputs& Inputs();

// Local extraction exactly as `spexctl extract --local` does it (core::ExtractFrame on
// the CPU backend), for comparisons.
absl::StatusOr<core::Frame> LocalExtract(const std::string& psf_path, const std::string& frame_path,
                                         const core::ExtractionParams& params);

// Wraps a backend: sleeps before handing each bundle on, counts bundles, and can be
// marked unhealthy, so tests can cancel mid-stream, hit deadlines and fail health.
class SlowBackend : public core::Backend {
 public:
  SlowBackend(std::unique_ptr<core::Backend> inner, double seconds_per_bundle);
  std::string name() const override { return inner_->name(); }
  std::string description() const override { return "slow " + inner_->description(); }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override;
  bool healthy() const override { return healthy_->load(); }
  core::BackendMemory Memory() const override { return inner_->Memory(); }
  void Release(const std::shared_ptr<const core::Geometry>& geometry) override {
    inner_->Release(geometry);
  }

  std::shared_ptr<std::atomic<int>> bundles_done() const { return bundles_done_; }
  std::shared_ptr<std::atomic<bool>> healthy_flag() const { return healthy_; }

 private:
  std::unique_ptr<core::Backend> inner_;
  double seconds_per_bundle_;
  std::shared_ptr<std::atomic<int>> bundles_done_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<bool>> healthy_ = std::make_shared<std::atomic<bool>>(true);
};

// Options for a loopback test server on free ports with the test data root.
server::ServerOptions TestServerOptions();

// Starts the server and waits (bounded) for warm-up.
std::unique_ptr<server::SpexdServer> StartServer(server::ServerOptions options);

std::unique_ptr<client::SpexdClient> Connect(const server::SpexdServer& server,
                                             client::ClientOptions options = {});

// An ExtractHeader for the small test extraction with the given PSF id.
v1::ExtractHeader SmallHeader(const std::string& psf_id);
// SmallHeader as ten bundles of five fibres: enough bundle boundaries to stop at.
v1::ExtractHeader TenBundleHeader(const std::string& psf_id);
// Whether the server's one worker is idle.
bool WorkerIdle(client::SpexdClient& c);

// Streams an extraction into a core::Frame (client-side rebuild, as spexctl does).
absl::StatusOr<core::Frame> RemoteExtractFrame(client::SpexdClient& client,
                                               const v1::ExtractHeader& header,
                                               const std::string* upload, bool subset = false);

// Plain HTTP GET over loopback; returns the body, or an error with the status line.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// Compares two FITS files record by record (80 bytes); only CHECKSUM and DATASUM cards
// may differ (their comments carry the write time), and only when both files have them
// in the same place. The Bytes form takes the files' contents.
void ExpectSameFitsBytes(const std::string& a_path, const std::string& b_path);
void ExpectSameFitsContents(const std::string& a, const std::string& b, const std::string& what);

// Expects two frames to hold identical values, bit for bit.
void ExpectFramesIdentical(const core::Frame& a, const core::Frame& b);

// One server for a test suite, the small case's local extraction as reference, and per
// test a client with the PSF loaded (psf_id_).
class LoadedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = StartServer(TestServerOptions()).release();
    ASSERT_NE(server_, nullptr);
    auto local = LocalExtract(Inputs().psf_path, Inputs().frame_path, SmallParams());
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = new core::Frame(*std::move(local));
  }
  static void TearDownTestSuite() {
    delete server_;
    delete local_;
    server_ = nullptr;
    local_ = nullptr;
  }
  void SetUp() override {
    client_ = Connect(*server_);
    ASSERT_NE(client_, nullptr);
    auto psf = client_->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
  }

  static inline server::SpexdServer* server_ = nullptr;
  static inline core::Frame* local_ = nullptr;
  std::unique_ptr<client::SpexdClient> client_;
  std::string psf_id_;
};

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_INTEGRATION_SERVICE_FIXTURE_H_
