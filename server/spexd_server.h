// The spexd service assembled from its parts: metrics, data roots, PSF cache, scheduler
// and workers, the gRPC services (extraction, admin, health, reflection), warm-up and
// graceful drain. Used by main.cc and by in-process tests.
#ifndef SPEXD_SERVER_SPEXD_SERVER_H_
#define SPEXD_SERVER_SPEXD_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/backend/backend.h"
#include "server/jobs/extract_job.h"
#include "server/state/scheduler.h"
#include "server/state/shadow_parity.h"

namespace spexd::server {

class PsfCache;
class ServerMetrics;

// Where the service listens.
struct NetworkOptions {
  std::string listen = "127.0.0.1:50051";         // host:port; port 0 picks a free one
  std::string metrics_listen = "127.0.0.1:9464";  // empty: no metrics endpoint
};

// Who may call: TLS from PEM files (with tls_client_ca the server requires and verifies
// client certificates: mutual TLS) and a bearer token.
struct SecurityOptions {
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  std::string auth_token;  // required bearer token, empty: none
};

// The workers and the backends they extract with.
struct WorkerOptions {
  // The backend kind; none = auto (CUDA when the module finds a GPU, else CPU).
  std::optional<core::BackendKind> backend;
  std::vector<int> gpu_devices;  // empty: every visible device
  static constexpr int kDefaultBackendsPerGpu = 2;
  static constexpr int kMaxBackendsPerGpu = 4;
  // Workers (each its own CUDA backend) per GPU: with two, one frame's host preparation and
  // last batch overlap the other's GPU work (0: kDefaultBackendsPerGpu).
  int backends_per_gpu = 0;
  // Host threads of the backends' shared pool, the worker's own included (0: all cores).
  int cpu_threads = 0;
  std::string cuda_module;  // "" = default search (core loader)
  // Tests only: the CPU backends' fault plan (core::BackendOptions::cpu_test_faults), which
  // main reads from $SPEXD_TEST_CPU_FAULTS; no flag carries it.
  std::string cpu_test_faults;
  // Replaces the backend choice (tests inject slow or failing backends). Called once
  // during warm-up; the reason string is reported as the backend choice.
  std::function<absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>>(std::string* reason)>
      backend_factory;
};

// The files the service reads and writes, and what it keeps of them in memory.
struct StorageOptions {
  std::vector<std::string> data_roots;    // where request paths may point
  std::vector<std::string> output_roots;  // where server-side output may go
  int64_t psf_cache_bytes = int64_t{4} << 30;
  std::vector<std::string> preload_psfs;  // server paths loaded during warm-up
};

// The service's configuration, one group per concern (server_config.h lists the flag
// that sets each member).
struct ServerOptions {
  NetworkOptions network;
  SecurityOptions security;
  ServiceLimits limits;         // sizes, timeouts and connection bounds
  SchedulerOptions scheduling;  // queue and upload bounds, prefetch, streamers, deadlines
  WorkerOptions workers;
  StorageOptions storage;
  // Quality checks while serving: shadow parity sampling (server/state/shadow_parity.h),
  // fraction 0 turns it off.
  ShadowParityOptions shadow_parity;
};

class SpexdServer {
 public:
  // Binds the ports and starts serving with health NOT_SERVING; warm-up (backends,
  // preloaded PSFs) continues in the background, then health turns SERVING.
  static absl::StatusOr<std::unique_ptr<SpexdServer>> Start(ServerOptions options);
  ~SpexdServer();  // drains with no grace if Drain was not called

  int port() const;          // the bound gRPC port
  int metrics_port() const;  // the bound metrics port, 0 without an endpoint

  // Waits for warm-up to end: OK when serving, its error when warm-up failed.
  absl::Status WaitForWarmUp(absl::Duration timeout);

  // Graceful drain: health NOT_SERVING, new extractions refused (UNAVAILABLE), work in
  // flight may finish within `grace`; then remaining calls are cancelled (workers stop
  // at their next patch, CPU, or patch batch, CUDA) and everything stops. Idempotent.
  void Drain(absl::Duration grace);

  ServerMetrics& metrics();
  PsfCache& cache();

  class Impl;

 private:
  explicit SpexdServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SPEXD_SERVER_H_
