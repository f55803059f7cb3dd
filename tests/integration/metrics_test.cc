// The Prometheus endpoint, scraped over loopback HTTP and linted with `promtool check
// metrics` (Debian package `prometheus`, unpacked by scripts/install-deps.sh), and every
// other HTTP request answered without harm to the server.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

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
  o.network.metrics_listen = "127.0.0.1:0";
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

// Any request but GET /metrics once killed spexd (civetweb's worker stack overflowed).
// Every probe of the hostile-client run now gets its status, and afterwards the scrape and
// the gRPC side still answer. The silent and half-sent clients hold their connections
// until the read deadline (10 s) while everything else is answered.
TEST(MetricsTest, EveryHttpRequestIsAnsweredAndTheServerKeepsServing) {
  server::ServerOptions o = TestServerOptions();
  o.network.metrics_listen = "127.0.0.1:0";
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  const int port = server->metrics_port();
  ASSERT_GT(port, 0);
  auto silent = std::async(std::launch::async, [&] { return RawHttpExchange(port, "", 30); });
  auto half = std::async(std::launch::async, [&] {
    return RawHttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Ag", 30);
  });
  struct Probe {
    std::string request;
    int status;
  };
  const std::vector<Probe> probes = {
      {"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n", 404},
      {"GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
      {"GET /no/such/path?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
      {"HEAD /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 200},
      {"POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc", 405},
      {"\x16\x03\x01\x02\xfc\x03\x03 not-http\r\n\r\n", 400},  // TLS-like bytes
      {"GET /metrics HTTP/1.1\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n", 431},
  };
  for (const Probe& p : probes) {
    const auto r = RawHttpExchange(port, p.request, 10);
    EXPECT_EQ(HttpStatusOf(r.response), p.status)
        << p.request.substr(0, 40) << "\n" << r.response.substr(0, 300);
    EXPECT_TRUE(r.closed);
  }
  const auto post = RawHttpExchange(port, probes[4].request, 10);
  EXPECT_NE(post.response.find("Allow: GET, HEAD\r\n"), std::string::npos) << post.response;

  const auto half_r = half.get();
  EXPECT_EQ(HttpStatusOf(half_r.response), 408) << half_r.response;
  const auto silent_r = silent.get();
  EXPECT_TRUE(silent_r.closed);
  EXPECT_EQ(silent_r.response, "");
  EXPECT_LT(silent_r.seconds, 20.0);

  auto body = HttpGet(port, "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_NE(body->find("spexd_serving 1"), std::string::npos) << *body;
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  auto health = c->CheckHealth();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
}

}  // namespace
}  // namespace spexd::testing
