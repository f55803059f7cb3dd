// The Prometheus endpoint, scraped over loopback HTTP and linted with `promtool check
// metrics` (Debian package `prometheus`, unpacked by scripts/install-deps.sh).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// $SPEXD_PROMTOOL, then PATH, then where install-deps.sh unpacks it; "" if absent.
std::string FindPromtool() {
  if (const char* env = std::getenv("SPEXD_PROMTOOL"); env != nullptr && access(env, X_OK) == 0) {
    return env;
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string dirs = path;
    std::size_t start = 0;
    while (start <= dirs.size()) {
      const std::size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::string candidate = dirs.substr(start, end - start) + "/promtool";
      if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
  }
  const std::string unpacked = "/usr/local/lib/spexd-tools/prometheus/usr/bin/promtool";
  if (access(unpacked.c_str(), X_OK) == 0) return unpacked;
  return "";
}

TEST(MetricsTest, ScrapedOverHttpAndAcceptedByPromtool) {
  server::ServerOptions o = TestServerOptions();
  o.metrics_listen = "127.0.0.1:0";
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->metrics_port(), 0);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok());
  ASSERT_TRUE(RemoteExtractFrame(*c, SmallHeader(psf->id()), &Inputs().frame_bytes).ok());
  EXPECT_FALSE(RemoteExtractFrame(*c, SmallHeader("unknown"), &Inputs().frame_bytes).ok());
  // The monitor refreshes host memory once a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));

  auto body = HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  for (const char* expected : {
           "spexd_requests_total{code=\"OK\",rpc=\"ExtractFrame\"} 1",
           "spexd_requests_total{code=\"NOT_FOUND\",rpc=\"ExtractFrame\"} 1",
           "spexd_requests_total{code=\"OK\",rpc=\"LoadPsf\"} 1",
           "spexd_queue_depth{priority=\"realtime\"} 0",
           "spexd_queue_wait_seconds_count{priority=\"reprocessing\"} 1",
           "spexd_frame_duration_seconds_count 1",
           "spexd_bundle_duration_seconds_count 2",
           "spexd_bundles_total 2",
           "spexd_patches_total{outcome=\"extracted\"}",
           "spexd_psf_cache_hits_total{kind=\"psf\"}",
           "spexd_psf_cache_misses_total{kind=\"geometry\"} 1",
           "spexd_psf_cache_evictions_total{kind=\"psf\"} 0",
           "spexd_psf_cache_bytes",
           "spexd_host_memory_bytes",
           "spexd_backend_healthy{backend=\"cpu\",worker=\"0\"} 1",
           "spexd_fiber_chi2pix_median_count 50",
           "spexd_fiber_masked_ratio_count 50",
           "spexd_serving 1",
       }) {
    EXPECT_NE(body->find(expected), std::string::npos) << expected << "\n" << *body;
  }
  EXPECT_EQ(body->find("spexd_host_memory_bytes 0\n"), std::string::npos);

  const std::string promtool = FindPromtool();
  if (promtool.empty()) {
    if (std::getenv("CI") != nullptr) {
      FAIL() << "promtool not found (CI): run scripts/install-deps.sh, which unpacks it from "
                "Debian's prometheus package, or set SPEXD_PROMTOOL";
    }
    GTEST_SKIP() << "promtool not found: run scripts/install-deps.sh (or set SPEXD_PROMTOOL) "
                    "to lint the metrics; the scrape itself passed";
  }
  const std::string file = MakeTempDir() + "/metrics.txt";
  ASSERT_TRUE(WriteBytes(file, *body));
  const std::string cmd = absl::StrCat(promtool, " check metrics < ", file, " 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  const int rc = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd << "\n" << output;
}

}  // namespace
}  // namespace spexd::testing
