// spexd: the extraction service. Flags are defined here only (style.md); everything
// else takes the typed ServerConfig they fill (server/server_config.h).
#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/base/program_help.h"
#include "core/base/status_macros.h"
#include "core/cpu/blas_core_type.h"
#include "server/config_file.h"
#include "server/log.h"
#include "server/server_config.h"
#include "server/spexd_server.h"

ABSL_FLAG(std::string, config, "", "optional file of key = value lines mirroring these flags");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "gRPC address (host:port; loopback by default)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics address (host:port); empty disables it");
ABSL_FLAG(std::string, data_roots, "",
          "comma-separated directories that request paths may point into");
ABSL_FLAG(std::string, output_roots, "",
          "comma-separated directories that server-side output (server_output_path) may be "
          "written under; empty disables server-side output");
ABSL_FLAG(std::string, backend, "auto", "auto (GPU if any, else CPU), cpu or cuda");
ABSL_FLAG(std::string, gpu_devices, "", "comma-separated CUDA devices to use (default: all)");
ABSL_FLAG(int, backends_per_gpu, 0,
          "workers per GPU, each with its own CUDA backend, so that frames overlap on the GPU "
          "(one frame's host preparation and last batch beside the other's kernels); 0: the "
          "default (docs/service.md), at most 4");
ABSL_FLAG(int, cpu_threads, 0,
          "host threads of the backends: CPU patches solved at once, CUDA host-side work (0: all "
          "cores); spexctl --cpu-threads is the same option for local extraction");
ABSL_FLAG(std::string, gpu_host_wait, "block",
          "how the CUDA backends' host threads wait for the GPU: block (the default: the "
          "thread sleeps, leaving the cores to the host's inflate, decode and writes; "
          "docs/performance.md), auto (CUDA's choice: spin while there are fewer GPU contexts than "
          "cores), spin or yield");
ABSL_FLAG(std::string, cuda_module, "", "path of libspexd_cuda.so (default: next to spexd)");
ABSL_FLAG(int, max_queue, 0,
          "extractions waiting for a worker before RESOURCE_EXHAUSTED (0: 8 per worker, at "
          "least 16)");
ABSL_FLAG(int, max_uploads, 0,
          "image and PSF uploads in progress before RESOURCE_EXHAUSTED (0: as --max_queue)");
ABSL_FLAG(int, realtime_reserve, 1,
          "extra queue and upload slots that only realtime requests may use");
ABSL_FLAG(double, upload_idle_seconds, 30,
          "an upload (or a stream without its header) that sends nothing for this long is "
          "cancelled, freeing its slot (0: never)");
ABSL_FLAG(double, upload_min_bytes_per_second, 256 * 1024,
          "an upload slower than this, averaged over --upload_rate_window_seconds, is ended "
          "with DEADLINE_EXCEEDED, freeing its slot (0: no floor)");
ABSL_FLAG(double, upload_rate_window_seconds, 20,
          "the span over which --upload_min_bytes_per_second is measured (also the grace "
          "after the header)");
ABSL_FLAG(double, write_timeout_seconds, 60,
          "a call whose client does not read its responses for this long is cancelled and "
          "its worker freed (0: never)");
ABSL_FLAG(int, prefetch, 0,
          "frames read and decoded ahead per worker; 0: 8 per GPU worker (reading a .fits.gz "
          "r frame takes longer than a GPU extracts it), 2 for the CPU backend. The total is "
          "bounded by --prefetch_memory_bytes");
ABSL_FLAG(int64_t, prefetch_memory_bytes, 0,
          "host memory for all frames decoded ahead, at 320 MB a frame (at least one frame per "
          "worker); 0: a quarter of the host's (or the cgroup's) memory");
ABSL_FLAG(int, streamers_per_worker, 0,
          "threads streaming responses per worker (0: 4 per GPU worker, 2 for the CPU backend): "
          "each frame being streamed or written holds its decoded planes; more let a worker run "
          "ahead of slow readers and of the frame files the server writes");
ABSL_FLAG(double, no_deadline_horizon_seconds, 600,
          "a request without a deadline is scheduled as if due this long after its admission, "
          "so that requests with deadlines cannot hold it back forever (the call itself keeps "
          "no deadline); 0: after every request that has one");
ABSL_FLAG(int64_t, psf_cache_bytes, int64_t{4} << 30,
          "host memory budget of the PSF and geometry cache");
ABSL_FLAG(int64_t, max_upload_bytes, int64_t{1} << 30,
          "largest image upload or server-side image file");
ABSL_FLAG(int64_t, max_image_pixels, int64_t{1} << 26, "largest image (height x width)");
ABSL_FLAG(int64_t, max_request_bytes, int64_t{8} << 30,
          "host memory one extraction may need by its up-front estimate (plan, spots, "
          "results, model, solver workspace; a DESI frame needs ~0.7 GB): RESOURCE_EXHAUSTED "
          "above it");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{4} << 20, "largest gRPC message either way");
ABSL_FLAG(double, handshake_timeout_seconds, 10,
          "a connection that has not finished its TLS and HTTP/2 handshake by then is closed");
ABSL_FLAG(double, connection_idle_seconds, 60,
          "a connection with no call open for this long is closed (clients reconnect)");
ABSL_FLAG(double, drain_seconds, 30, "grace period for work in flight on SIGTERM");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate (enables TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM server private key");
ABSL_FLAG(std::string, tls_client_ca, "", "PEM CA for client certificates (mutual TLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding the bearer token that clients must send (authorization metadata)");
ABSL_FLAG(std::string, preload_psfs, "", "comma-separated PSF paths to load during warm-up");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error (others are refused)");
ABSL_FLAG(double, shadow_parity_fraction, 0.01,
          "fraction of served frames of which one bundle is extracted again by the CPU "
          "reference backend and compared with what was served (docs/operations.md); 0: off");
ABSL_FLAG(int, shadow_parity_threads, 1,
          "CPU threads of the shadow parity reference, at the lowest scheduling priority "
          "(0: one per core)");

namespace {

using spexd::server::Log;
using spexd::server::LogLevel;
using spexd::server::ServerConfig;

int Fail(const std::string& message) {
  Log(LogLevel::kError, "startup_failed", {{"error", message}});
  return 1;
}

pthread_t g_main_thread;

// SIGTERM/SIGINT taken by a thread that a library started before main() blocked them
// (OpenBLAS starts its pool at load time) would otherwise kill the process, e.g. the
// second SIGTERM of a Slurm job end (the step's and the script's) in the middle of the
// drain. Hand it to the main thread, which takes it with sigwait or leaves it pending.
// pthread_kill is async-signal-safe.
void ForwardToMainThread(int sig) { pthread_kill(g_main_thread, sig); }

// Signals whose default action would end the server at once, with work in flight and no
// log line, though nothing asks it to stop: a stray `kill -USR1` (log rotation scripts
// send it to daemons), SIGUSR2, SIGALRM. Taken by the main thread, logged and ignored.
constexpr int kIgnoredSignals[] = {SIGUSR1, SIGUSR2, SIGALRM};

const char* SignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGALRM: return "SIGALRM";
    default: return "other";
  }
}

// `--help` lists the flags of the files that match; absl's default matches only a file
// named after the program (spexd.cc), so main.cc's flags were left out.
bool IsSpexdFlagFile(absl::string_view file) { return absl::StrContains(file, "server/"); }

// The one place the flags are read (style.md): into the typed configuration, then its
// one validation (server/server_config.h).
absl::StatusOr<ServerConfig> ConfigFromFlags() {
  using namespace spexd::server;
  ServerConfig config;
  ServerOptions& o = config.server;
  SPEXD_ASSIGN_OR_RETURN(config.log_level, ParseLogLevel(absl::GetFlag(FLAGS_log_level)));
  o.listen = absl::GetFlag(FLAGS_listen);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.data_roots = SplitList(absl::GetFlag(FLAGS_data_roots));
  o.output_roots = SplitList(absl::GetFlag(FLAGS_output_roots));
  SPEXD_ASSIGN_OR_RETURN(o.backend, ParseBackendChoice(absl::GetFlag(FLAGS_backend)));
  SPEXD_ASSIGN_OR_RETURN(o.gpu_devices, ParseDeviceList(absl::GetFlag(FLAGS_gpu_devices)));
  o.backends_per_gpu = absl::GetFlag(FLAGS_backends_per_gpu);
  o.cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  o.cuda_module = absl::GetFlag(FLAGS_cuda_module);
  SPEXD_ASSIGN_OR_RETURN(o.gpu_host_wait, spexd::core::ParseCudaHostWait(absl::GetFlag(FLAGS_gpu_host_wait)));
  o.max_queue = absl::GetFlag(FLAGS_max_queue);
  o.max_uploads = absl::GetFlag(FLAGS_max_uploads);
  o.realtime_reserve = absl::GetFlag(FLAGS_realtime_reserve);
  o.limits.upload_idle_seconds = absl::GetFlag(FLAGS_upload_idle_seconds);
  o.limits.write_timeout_seconds = absl::GetFlag(FLAGS_write_timeout_seconds);
  o.limits.upload_min_bytes_per_second = absl::GetFlag(FLAGS_upload_min_bytes_per_second);
  o.limits.upload_rate_window_seconds = absl::GetFlag(FLAGS_upload_rate_window_seconds);
  o.prefetch = absl::GetFlag(FLAGS_prefetch);
  o.prefetch_memory_bytes = absl::GetFlag(FLAGS_prefetch_memory_bytes);
  o.streamers_per_worker = absl::GetFlag(FLAGS_streamers_per_worker);
  o.no_deadline_horizon_seconds = absl::GetFlag(FLAGS_no_deadline_horizon_seconds);
  o.psf_cache_bytes = absl::GetFlag(FLAGS_psf_cache_bytes);
  o.limits.max_upload_bytes = absl::GetFlag(FLAGS_max_upload_bytes);
  o.limits.max_image_pixels = absl::GetFlag(FLAGS_max_image_pixels);
  o.limits.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.limits.handshake_timeout_seconds = absl::GetFlag(FLAGS_handshake_timeout_seconds);
  o.limits.connection_idle_seconds = absl::GetFlag(FLAGS_connection_idle_seconds);
  o.limits.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  o.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  o.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  o.preload_psfs = SplitList(absl::GetFlag(FLAGS_preload_psfs));
  if (const std::string token_file = absl::GetFlag(FLAGS_auth_token_file); !token_file.empty()) {
    SPEXD_ASSIGN_OR_RETURN(o.auth_token, ReadAuthToken(token_file));
  }
  o.shadow_parity.fraction = absl::GetFlag(FLAGS_shadow_parity_fraction);
  o.shadow_parity.threads = absl::GetFlag(FLAGS_shadow_parity_threads);
  config.drain_seconds = absl::GetFlag(FLAGS_drain_seconds);
  SPEXD_RETURN_IF_ERROR(ValidateServerConfig(config));
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);  // before any thread (blas_core_type.h)
  using namespace spexd::server;
  // Signals are taken synchronously by sigwait below; block them before any thread
  // (gRPC, the metrics server, workers) starts so that every thread inherits the mask. SIGHUP
  // (a closed terminal, a supervisor's reload) drains like SIGTERM: its default action
  // killed the server with requests in flight and no log line. Started
  // with SIGHUP ignored (nohup), it stays ignored.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  struct sigaction hup {};
  const bool take_hup = sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN;
  if (take_hup) sigaddset(&signals, SIGHUP);
  for (int sig : kIgnoredSignals) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  g_main_thread = pthread_self();
  struct sigaction forward = {};
  forward.sa_handler = ForwardToMainThread;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGINT, &forward, nullptr);
  if (take_hup) sigaction(SIGHUP, &forward, nullptr);
  for (int sig : kIgnoredSignals) sigaction(sig, &forward, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  absl::SetProgramUsageMessage(
      "the DESI spectral extraction service (gRPC); the flags can also be given as "
      "key = value lines in a --config file");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = IsSpexdFlagFile;
  usage.contains_helpshort_flags = IsSpexdFlagFile;
  absl::SetFlagsUsageConfig(usage);
  if (spexd::core::PrintHelpIfAsked(argc, argv, IsSpexdFlagFile)) return 0;
  auto merged = MergeConfigArgs(argc, argv);
  if (!merged.ok()) return Fail(merged.status().ToString());
  std::vector<char*> args;
  for (std::string& a : *merged) args.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());

  absl::StatusOr<ServerConfig> config = ConfigFromFlags();
  if (!config.ok()) return Fail(std::string(config.status().message()));
  SetMinLogLevel(config->log_level);
  ServerOptions o = std::move(config->server);
  const double drain_seconds = config->drain_seconds;

  auto server = SpexdServer::Start(std::move(o));
  if (!server.ok()) return Fail(server.status().ToString());
  // A warm-up that fails (a --gpu_devices entry with no such GPU, --backend=cuda without
  // one, a preloaded PSF that cannot be read) is a configuration error: exit with it rather
  // than stay NOT_SERVING for good. The watcher wakes the signal wait below with a signal
  // to the main thread itself: sent to the process, it could go to a thread started
  // before the mask above (a library's, at load time) and kill the process outright.
  std::atomic<bool> warmup_failed{false};
  const pthread_t main_thread = pthread_self();
  std::thread warmup_watcher([&server, &warmup_failed, main_thread] {
    const absl::Status warm = (*server)->WaitForWarmUp(absl::InfiniteDuration());
    if (warm.ok()) return;
    warmup_failed.store(true);
    Fail(warm.ToString());
    pthread_kill(main_thread, SIGTERM);
  });

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) break;
    Log(LogLevel::kWarning, "signal_ignored", {{"signal", SignalName(sig)}});
  }
  if (!warmup_failed.load()) Log(LogLevel::kInfo, "signal", {{"signal", SignalName(sig)}});
  (*server)->Drain(absl::Seconds(drain_seconds));
  warmup_watcher.join();  // Drain ends the warm-up, so the watcher has returned
  server->reset();
  const int code = warmup_failed.load() ? 1 : 0;
  Log(LogLevel::kInfo, "exit", {{"code", code}});
  return code;
}
