// Shadow parity end to end: a real spexd (CPU backend) with every frame
// sampled. With the test fault SPEXD_TEST_CPU_FAULTS=perturb_bundle_flux=1 (bundle 1 of
// every frame served with each spectrum's peak raised by 1e-6 of it) the check flags a
// drift: the metric counts it and the log names the request, PSF and bundle. Without it
// every check is ok. The summary's FrameQa says the frame was sampled.
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/lib/spexd_client.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/spawned_server.h"

namespace spexd::testing {
namespace {

// The raw value of "key": in a one-line JSON log record (up to the next ',' or '}'), or "".
// Plain string search: <regex> trips GCC 12's -Wmaybe-uninitialized under ASan (CI).
std::string JsonField(absl::string_view line, absl::string_view key) {
  const std::string needle = absl::StrCat("\"", key, "\":");
  const std::size_t at = line.find(needle);
  if (at == absl::string_view::npos) return "";
  const std::size_t begin = at + needle.size();
  const std::size_t end = line.find_first_of(",}", begin);
  return std::string(line.substr(begin, end == absl::string_view::npos ? line.npos : end - begin));
}

int MetricsPort(const std::string& log) {
  int port = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const std::string v = JsonField(line, "metrics_port");
    if (!v.empty() && absl::SimpleAtoi(v, &port)) return port;
  }
  return 0;
}

// The log's shadow-parity drift records.
std::vector<std::string> DriftLines(const std::string& log) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (JsonField(line, "event") == "\"shadow_parity_drift\"") out.emplace_back(line);
  }
  return out;
}

struct SampledRun {
  double ok = 0, drift = 0, skipped = 0;
  std::vector<v1::FrameQa> qa;
  std::string log;
};

// Extracts the small frame up to `frames` times, one at a time, waiting for each frame's
// check; stops after the first frame whose sampled bundle is `stop_after_bundle` (-1: never).
SampledRun ExtractSampled(const std::vector<std::string>& env, int frames, int stop_after_bundle) {
  SpawnedServer spexd({"--shadow_parity_fraction=1", "--metrics_listen=127.0.0.1:0", "--cpu_threads=2"},
                      env);
  SampledRun run;
  const int port = spexd.WaitForPort(30);
  EXPECT_GT(port, 0) << spexd.Log();
  const int mport = MetricsPort(spexd.Log());
  EXPECT_GT(mport, 0) << spexd.Log();
  if (port <= 0 || mport <= 0) return run;
  client::ClientOptions o;
  o.target = absl::StrCat("127.0.0.1:", port);
  auto c = client::SpexdClient::Create(o);
  EXPECT_TRUE(c.ok());
  absl::StatusOr<v1::PsfInfo> psf = absl::UnknownError("not loaded");
  for (int i = 0; i < 50 && !psf.ok(); ++i) {
    psf = (*c)->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    if (!psf.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(psf.ok()) << psf.status();
  if (!psf.ok()) return run;
  const std::string cpu = "backend=\"cpu\",gpu=\"cpu\",result=";
  for (int i = 0; i < frames; ++i) {
    client::ExtractCallbacks cb;
    cb.on_summary = [&run](const v1::ExtractSummary& s) { run.qa.push_back(s.qa()); };
    absl::Status st = (*c)->Extract(SmallHeader(psf->id()), &Inputs().frame_bytes, false, cb);
    EXPECT_TRUE(st.ok()) << st;
    // Wait for this frame's check (queue of 2, one at a time: never skipped here).
    EXPECT_TRUE(WaitFor([&] {
      auto body = HttpGet(mport, "/metrics");
      if (!body.ok()) return false;
      run.ok = SeriesValue(*body, "spexd_shadow_parity_checks_total{" + cpu + "\"ok\"}");
      run.drift = SeriesValue(*body, "spexd_shadow_parity_checks_total{" + cpu + "\"drift\"}");
      run.skipped = SeriesValue(*body, "spexd_shadow_parity_checks_total{" + cpu + "\"skipped\"}");
      return run.ok + run.drift + run.skipped >= i + 1;
    }, 60)) << spexd.Log();
    if (!run.qa.empty() && run.qa.back().shadow_bundle() == stop_after_bundle) break;
  }
  // The check writes its log line before it counts the metric, but this test reads the
  // server's stderr through a pipe: the line may still be on its way (TSan made CI see it).
  if (run.drift > 0) {
    EXPECT_TRUE(WaitFor([&] {
      return DriftLines(spexd.Log()).size() >= static_cast<std::size_t>(run.drift);
    }, 30)) << spexd.Log();
  }
  run.log = spexd.Log();
  return run;
}

TEST(ShadowParityTest, InjectedFluxErrorIsFlaggedInMetricsAndLog) {
  // Each frame's sampled bundle is 0 or 1 at random; the run goes on until bundle 1 was
  // checked (60 frames all missing it: probability 2^-60). Every check of bundle 0 is ok.
  SampledRun run = ExtractSampled({"SPEXD_TEST_CPU_FAULTS=perturb_bundle_flux=1"}, 60, 1);
  ASSERT_FALSE(run.qa.empty());
  ASSERT_EQ(run.qa.back().shadow_bundle(), 1) << run.log;
  EXPECT_EQ(run.drift, 1) << run.log;
  EXPECT_EQ(run.ok, static_cast<double>(run.qa.size() - 1)) << run.log;
  EXPECT_EQ(run.skipped, 0) << run.log;
  for (const v1::FrameQa& q : run.qa) {
    EXPECT_EQ(q.shadow_parity(), "queued");
    EXPECT_GT(q.request_id(), 0u);
    EXPECT_GT(q.worst_condition(), 0.0);
    EXPECT_EQ(q.bins(), 50 * 51);
  }
  // The drift names the request, the PSF (64 hex digits) and bundle 1, with its deviation.
  const std::vector<std::string> drifts = DriftLines(run.log);
  ASSERT_FALSE(drifts.empty()) << run.log;
  bool found = false;
  for (const std::string& line : drifts) {
    // Bundle 0 is served clean: no drift names it.
    EXPECT_NE(JsonField(line, "bundle"), "0") << line;
    if (JsonField(line, "bundle") != "1") continue;
    uint64_t request = 0;
    EXPECT_TRUE(absl::SimpleAtoi(JsonField(line, "request"), &request)) << line;
    const std::string psf = JsonField(line, "psf");
    EXPECT_EQ(psf.size(), 66u) << line;  // the quotes and 64 hex digits
    EXPECT_EQ(psf.find_first_not_of("0123456789abcdef", 1), 65u) << line;
    double dev = 0;
    ASSERT_TRUE(absl::SimpleAtod(JsonField(line, "flux_dev"), &dev)) << line;
    EXPECT_NEAR(dev, 1e-6, 1e-7);
    found = true;
  }
  EXPECT_TRUE(found) << "no drift names bundle 1: " << run.log;
}

TEST(ShadowParityTest, NoFaultNoDrift) {
  SampledRun run = ExtractSampled({}, 6, -1);
  EXPECT_EQ(run.drift, 0) << run.log;
  EXPECT_EQ(run.ok, 6) << run.log;
  EXPECT_EQ(run.log.find("shadow_parity_drift"), std::string::npos);
  ASSERT_EQ(run.qa.size(), 6u);
  EXPECT_EQ(run.qa[0].shadow_parity(), "queued");
}

}  // namespace
}  // namespace spexd::testing
