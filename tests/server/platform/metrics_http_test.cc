// MetricsHttpServer (server/platform/metrics_http.h): every method and path gets an
// answer, malformed and oversized requests get their 4xx, and slow, silent, non-reading
// or too many clients are bounded by the deadlines and the connection limit. Loopback
// sockets with short deadlines; the real server's endpoint is MetricsTest's.
#include "server/platform/metrics_http.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

using testing::HttpStatusOf;
using testing::RawHttpExchange;

constexpr const char* kBody = "# TYPE x_total counter\nx_total 1\n";

MetricsHttpServer::Options ShortOptions() {
  MetricsHttpServer::Options o;
  o.max_connections = 4;
  o.read_timeout = std::chrono::milliseconds(400);
  o.write_timeout = std::chrono::milliseconds(800);
  o.linger = std::chrono::milliseconds(200);
  return o;
}

std::unique_ptr<MetricsHttpServer> StartOrDie(MetricsHttpServer::Render render,
                                              MetricsHttpServer::Options o = ShortOptions()) {
  auto s = MetricsHttpServer::Start("127.0.0.1:0", std::move(render), o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  EXPECT_GT((*s)->port(), 0);
  return *std::move(s);
}

std::string Body(const std::string& response) {
  const std::size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

void ExpectScrapeWorks(int port) {
  const auto r = RawHttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 5);
  EXPECT_EQ(HttpStatusOf(r.response), 200) << r.response;
  EXPECT_EQ(Body(r.response), kBody);
}

TEST(MetricsHttpTest, AnswersEveryMethodAndPath) {
  auto s = StartOrDie([] { return std::string(kBody); });
  ASSERT_NE(s, nullptr);
  const std::string long_header = "X-Long: " + std::string(20000, 'a') + "\r\n";
  struct Case {
    std::string request;
    int status;
    const char* must_contain;
  };
  const std::vector<Case> cases = {
      {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 200, "Content-Type: text/plain; version=0.0.4"},
      {"GET /metrics?name=x HTTP/1.0\r\n\r\n", 200, "x_total 1"},
      {"GET http://h:1/metrics HTTP/1.1\r\n\r\n", 200, "x_total 1"},
      {"GET /metrics HTTP/1.0\n\n", 200, "x_total 1"},
      {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 404, "404 Not Found"},
      {"GET /favicon.ico HTTP/1.1\r\n\r\n", 404, ""},
      {"GET /metrics/../admin HTTP/1.1\r\n\r\n", 404, ""},
      {"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 405, "Allow: GET, HEAD\r\n"},
      {"DELETE /metrics HTTP/1.1\r\n\r\n", 405, "Allow: GET, HEAD\r\n"},
      {"PUT / HTTP/1.1\r\n\r\n", 404, ""},
      {"OPTIONS * HTTP/1.1\r\n\r\n", 404, ""},
      {"hello\r\n\r\n", 400, ""},
      {"GET /metrics\r\n\r\n", 400, ""},
      {"GET  /metrics HTTP/1.1\r\n\r\n", 400, ""},
      {"G\x01T /metrics HTTP/1.1\r\n\r\n", 400, ""},
      {"GET /metrics HTTP/2.0\r\n\r\n", 505, ""},
      {"GET /metrics FTP/1.0\r\n\r\n", 400, ""},
      {"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", 400, ""},
      {"GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n", 400, ""},
      {"GET /metrics HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400, ""},
      {"GET /metrics HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, ""},
      {"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       ""},
      {"POST /metrics HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413, ""},
      {"POST /metrics HTTP/1.1\r\nContent-Length: 999999999999999999999999\r\n\r\n", 400, ""},
      {"GET /metrics HTTP/1.1\r\n" + long_header + "\r\n", 431, ""},
      {"GET /" + std::string(20000, 'm') + " HTTP/1.1\r\n\r\n", 414, ""},
      {std::string(20000, '\0'), 414, ""},
  };
  for (const Case& c : cases) {
    const auto r = RawHttpExchange(s->port(), c.request, 5);
    const std::string shown = c.request.substr(0, 60);
    EXPECT_TRUE(r.closed) << shown;
    EXPECT_EQ(HttpStatusOf(r.response), c.status) << shown << "\n" << r.response.substr(0, 300);
    EXPECT_NE(r.response.find(c.must_contain), std::string::npos) << shown << "\n" << r.response;
    EXPECT_NE(r.response.find("Connection: close\r\n"), std::string::npos) << shown;
  }
  // HEAD: the headers of GET (the body's length included) and no body.
  const auto head = RawHttpExchange(s->port(), "HEAD /metrics HTTP/1.1\r\n\r\n", 5);
  EXPECT_EQ(HttpStatusOf(head.response), 200) << head.response;
  EXPECT_NE(head.response.find(absl::StrCat("Content-Length: ", std::string(kBody).size())),
            std::string::npos)
      << head.response;
  EXPECT_EQ(Body(head.response), "");
  const auto head404 = RawHttpExchange(s->port(), "HEAD / HTTP/1.1\r\n\r\n", 5);
  EXPECT_EQ(HttpStatusOf(head404.response), 404);
  EXPECT_EQ(Body(head404.response), "");
  ExpectScrapeWorks(s->port());
}

TEST(MetricsHttpTest, SlowAndSilentClientsEndAtTheReadDeadline) {
  auto s = StartOrDie([] { return std::string(kBody); });
  ASSERT_NE(s, nullptr);
  const int port = s->port();
  // Each in its own thread, at the same time; scrapes meanwhile are not held up.
  auto silent = std::async(std::launch::async, [&] { return RawHttpExchange(port, "", 5); });
  auto half = std::async(std::launch::async,
                         [&] { return RawHttpExchange(port, "GET /metrics HTTP/1.1\r\nHo", 5); });
  // Slowloris: a byte every 100 ms never ends the head; the deadline counts from accept.
  auto trickle = std::async(std::launch::async, [&] {
    return RawHttpExchange(port, "GET /metrics HTTP/1.1\r\nX-A: " + std::string(40, 'a'), 5, 1,
                           100);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ExpectScrapeWorks(port);
  const auto silent_r = silent.get();
  EXPECT_TRUE(silent_r.closed);
  EXPECT_EQ(silent_r.response, "");
  EXPECT_LT(silent_r.seconds, 2.0);
  const auto half_r = half.get();
  EXPECT_TRUE(half_r.closed);
  EXPECT_EQ(HttpStatusOf(half_r.response), 408) << half_r.response;
  EXPECT_LT(half_r.seconds, 2.0);
  const auto trickle_r = trickle.get();
  EXPECT_EQ(HttpStatusOf(trickle_r.response), 408) << trickle_r.response;
  EXPECT_LT(trickle_r.seconds, 3.0);  // well before its 40 bytes (4 s) were all sent
  ExpectScrapeWorks(port);
}

TEST(MetricsHttpTest, ConnectionsAreBoundedAndFreedAtTheirDeadline) {
  auto s = StartOrDie([] { return std::string(kBody); });
  ASSERT_NE(s, nullptr);
  const int port = s->port();
  std::vector<std::future<testing::RawHttpResult>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::async(std::launch::async, [&] { return RawHttpExchange(port, "", 5); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto refused = RawHttpExchange(port, "GET /metrics HTTP/1.1\r\n\r\n", 5);
  EXPECT_EQ(HttpStatusOf(refused.response), 503) << refused.response;
  for (auto& h : held) EXPECT_TRUE(h.get().closed);
  ExpectScrapeWorks(port);
}

TEST(MetricsHttpTest, ClientThatDoesNotReadIsClosedAtTheWriteDeadline) {
  const std::string big(16 << 20, '#');
  auto s = StartOrDie([&] { return big; });
  ASSERT_NE(s, nullptr);
  const int port = s->port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string get = "GET /metrics HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  // The loop goes on serving others while this response waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto other = RawHttpExchange(port, "GET / HTTP/1.1\r\n\r\n", 5);
  EXPECT_EQ(HttpStatusOf(other.response), 404);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the write deadline
  std::size_t got = 0;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  EXPECT_LT(got, big.size());  // cut off, not delivered in full
}

TEST(MetricsHttpTest, StopClosesOpenConnectionsAndTheListener) {
  auto s = StartOrDie([] { return std::string(kBody); },
                      [] {
                        MetricsHttpServer::Options o = ShortOptions();
                        o.read_timeout = std::chrono::seconds(30);
                        return o;
                      }());
  ASSERT_NE(s, nullptr);
  const int port = s->port();
  auto silent = std::async(std::launch::async, [&] { return RawHttpExchange(port, "", 20); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto t0 = std::chrono::steady_clock::now();
  s->Stop();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  const auto r = silent.get();
  EXPECT_TRUE(r.closed);
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_FALSE(RawHttpExchange(port, "GET /metrics HTTP/1.1\r\n\r\n", 2).connected);
  s->Stop();  // idempotent
}

TEST(MetricsHttpTest, AddressesAreCheckedAndTheBoundPortReported) {
  auto render = [] { return std::string(kBody); };
  for (const char* bad : {"9464", "", ":9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:12ab", "[::1", "[::1]9464"}) {
    EXPECT_FALSE(MetricsHttpServer::Start(bad, render).ok()) << bad;
  }
  auto first = MetricsHttpServer::Start("127.0.0.1:0", render);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT((*first)->port(), 0);
  auto taken = MetricsHttpServer::Start(absl::StrCat("127.0.0.1:", (*first)->port()), render);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kUnavailable) << taken.status();
  auto v6 = MetricsHttpServer::Start("[::1]:0", render);
  if (v6.ok()) {
    EXPECT_GT((*v6)->port(), 0);  // hosts without IPv6 loopback refuse it
  }
}

}  // namespace
}  // namespace spexd::server
