// The HTTP endpoint of the metrics: a small HTTP/1.x server that answers GET and HEAD
// /metrics with the text exposition, and every other request with a 4xx/5xx status
//. It replaces prometheus-cpp's Exposer, whose civetweb worker threads have a
// fixed 100 KiB stack that overflowed on any request other than GET /metrics.
//
// One thread runs a poll() loop over non-blocking sockets, so no request can need more
// stack than a plain function call. Bounded by design: a fixed number of connections
// (more get 503 at once), a request head of at most kMaxHeadBytes (else 431), a declared
// body of at most kMaxBodyBytes (else 413; bodies are never used), and deadlines counted
// from accept (the whole head) and from the answer (the whole write), so a slow, silent or
// vanished client only holds its own slot until its deadline. One request per
// connection (`Connection: close`).
#ifndef SPEXD_SERVER_METRICS_HTTP_H_
#define SPEXD_SERVER_METRICS_HTTP_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace spexd::server {

class MetricsHttpServer {
 public:
  struct Options {
    int max_connections = 64;
    std::size_t max_head_bytes = 16 * 1024;
    std::size_t max_body_bytes = 64 * 1024;
    // From accept to the end of the request head (slowloris, silent clients).
    std::chrono::milliseconds read_timeout{10000};
    // From the first byte of the answer to the last (clients that do not read).
    std::chrono::milliseconds write_timeout{10000};
    // After the answer: how long unread request bytes are drained before the close, so
    // that the client sees the answer rather than a reset.
    std::chrono::milliseconds linger{1000};
  };
  // The exposition text, rendered for each GET or HEAD of /metrics.
  using Render = std::function<std::string()>;

  // Binds `address` ("host:port", "[v6]:port"; port 0 picks a free one) and starts serving.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                  Render render, Options options);
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                  Render render) {
    return Start(address, std::move(render), Options());
  }
  ~MetricsHttpServer();  // Stop()
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  // Closes the listener and every connection and joins the loop thread; idempotent.
  void Stop();

 private:
  struct Conn;
  MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port, Render render,
                    Options options);
  void Loop();
  void OnReadable(Conn& c);
  void OnWritable(Conn& c);
  void Answer(Conn& c);  // parses c's request head and queues the response

  const int listen_fd_;
  const int wake_read_;  // a byte written to wake_write_ ends Loop()
  const int wake_write_;
  const int port_;
  const Render render_;
  const Options options_;
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_METRICS_HTTP_H_
