// spexd's configuration as one typed value: the ServerOptions that SpexdServer runs with,
// plus what main itself uses (log level, drain grace). Every flag is defined once, in
// SPEXD_SERVER_FLAGS below: its name, the member it sets (whose default is the flag's
// default) and its help. main.cc expands that list into the Abseil flags (which the
// --config file's keys name, config_file.h, and which --help lists) and into the one
// function that reads them; the text-to-value parsers and the one validation live here,
// so that every refusal reads the same and is unit tested
// (tests/server/top/server_config_test.cc). Nothing here reads a flag or the environment
// (docs/design.md: flags only next to main).
#ifndef SPEXD_SERVER_SERVER_CONFIG_H_
#define SPEXD_SERVER_SERVER_CONFIG_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/backend/backend_options.h"
#include "server/platform/log.h"
#include "server/spexd_server.h"

namespace spexd::server {

struct ServerConfig {
  ServerOptions server;
  LogLevel log_level = LogLevel::kInfo;
  double drain_seconds = 30;  // grace for work in flight on SIGTERM
};

// "debug", "info", "warning" or "error"; INVALID_ARGUMENT names --log_level and the
// allowed values otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);
// "auto" (nullopt: CUDA when a GPU is found, else CPU), "cpu" or "cuda".
absl::StatusOr<std::optional<core::BackendKind>> ParseBackendChoice(absl::string_view text);
// "0,1,...": CUDA device ordinals (empty: every visible device).
absl::StatusOr<std::vector<int>> ParseDeviceList(absl::string_view text);
// Comma-separated, blanks trimmed, empty items dropped.
std::vector<std::string> SplitList(absl::string_view text);
// The bearer token in `path` (surrounding blanks trimmed); INVALID_ARGUMENT when the
// file cannot be read or holds no token.
absl::StatusOr<std::string> ReadAuthToken(const std::string& path);

// Every check of the configuration, in one place: the FLAG_IN ranges of the flag list
// below (CheckFlagRanges), the listen addresses' form and ports (0..65535; 0: a free
// one). INVALID_ARGUMENT names the flag.
absl::Status ValidateServerConfig(const ServerConfig& config);
// The FLAG_IN ranges alone: INVALID_ARGUMENT "--NAME must be between LO and HI (got V)".
absl::Status CheckFlagRanges(const ServerConfig& config);

// How a flag's text becomes the ServerConfig member it sets (Set), and how the member's
// default reads as the flag's default (Show). A member that is an int, int64_t, double or
// string is its flag's own type; the other members are parsed from text by the parsers
// above, so that a bad value is refused with the same message wherever it comes from.
template <typename T>
struct FlagCodec {
  using Flag = T;
  static Flag Show(const T& value) { return value; }
  static absl::Status Set(const Flag& flag, T* value) {
    *value = flag;
    return absl::OkStatus();
  }
};
template <>
struct FlagCodec<std::vector<std::string>> {  // comma-separated (SplitList)
  using Flag = std::string;
  static Flag Show(const std::vector<std::string>& value);
  static absl::Status Set(const Flag& flag, std::vector<std::string>* value);
};
template <>
struct FlagCodec<std::vector<int>> {  // CUDA device ordinals (ParseDeviceList)
  using Flag = std::string;
  static Flag Show(const std::vector<int>& value);
  static absl::Status Set(const Flag& flag, std::vector<int>* value);
};
template <>
struct FlagCodec<std::optional<core::BackendKind>> {  // ParseBackendChoice
  using Flag = std::string;
  static Flag Show(const std::optional<core::BackendKind>& value);
  static absl::Status Set(const Flag& flag, std::optional<core::BackendKind>* value);
};
template <>
struct FlagCodec<LogLevel> {  // ParseLogLevel
  using Flag = std::string;
  static Flag Show(LogLevel value);
  static absl::Status Set(const Flag& flag, LogLevel* value);
};
// --auth_token_file names the file the token is read from (ReadAuthToken); empty: no
// token. The token itself is never shown as a default.
struct TokenFileCodec {
  using Flag = std::string;
  static Flag Show(const std::string&) { return ""; }
  static absl::Status Set(const Flag& path, std::string* token);
};

// The codec of a flag that sets ServerConfig member `member` (FLAG in the list below).
#define SPEXD_FLAG_CODEC(member)                                                                   \
  ::spexd::server::FlagCodec<decltype(std::declval<::spexd::server::ServerConfig&>().member)>

// Upper bounds of FLAG_IN ranges where only the lower one matters.
inline constexpr int64_t kFlagNoMax = std::numeric_limits<int64_t>::max();
inline constexpr double kFlagMaxSeconds = 1e9;  // finite, so that inf is refused as NaN is

// spexd's flags, each once. FLAG(name, member, help) sets ServerConfig's `member` through
// SPEXD_FLAG_CODEC(member); FLAG_AS(codec, name, member, help) names its codec;
// FLAG_IN(name, member, lo, hi, help) is a FLAG whose number must lie in [lo, hi]
// (CheckFlagRanges: a port, a count, a byte size or a timeout out of range stops spexd
// rather than being wrapped or taken as something else). The default of each flag is the
// member's default in ServerConfig{}. --config, which names the file of further flags, is
// main.cc's own and sets no member.
#define SPEXD_SERVER_FLAGS(FLAG, FLAG_AS, FLAG_IN)                                                 \
  /* Where it listens (ServerOptions::network). */                                                 \
  FLAG(listen, server.network.listen,                                                              \
       "gRPC address (host:port; loopback by default)")                                            \
  FLAG(metrics_listen, server.network.metrics_listen,                                              \
       "Prometheus /metrics address (host:port); empty disables it")                               \
                                                                                                   \
  /* TLS and the bearer token (ServerOptions::security). */                                        \
  FLAG(tls_cert, server.security.tls_cert_file,                                                    \
       "PEM server certificate (enables TLS)")                                                     \
  FLAG(tls_key, server.security.tls_key_file,                                                      \
       "PEM server private key")                                                                   \
  FLAG(tls_client_ca, server.security.tls_client_ca_file,                                          \
       "PEM CA for client certificates (mutual TLS)")                                              \
  FLAG_AS(::spexd::server::TokenFileCodec, auth_token_file, server.security.auth_token,            \
          "file holding the bearer token that clients must send (authorization metadata)")         \
                                                                                                   \
  /* Sizes, timeouts and connections (ServerOptions::limits). */                                   \
  FLAG_IN(max_upload_bytes, server.limits.max_upload_bytes, 1, kFlagNoMax,                         \
       "largest image upload or server-side image file")                                           \
  FLAG_IN(max_image_pixels, server.limits.max_image_pixels, 1, kFlagNoMax,                         \
       "largest image (height x width)")                                                           \
  FLAG_IN(max_request_bytes, server.limits.max_request_bytes, int64_t{64} << 20, kFlagNoMax,       \
       "host memory one extraction may need by its up-front estimate (plan, spots, results, "      \
       "model, solver workspace; a DESI frame needs ~0.7 GB): RESOURCE_EXHAUSTED above it")        \
  FLAG_IN(max_message_bytes, server.limits.max_message_bytes, int64_t{1} << 20, int64_t{64} << 20, \
       "largest gRPC message either way")                                                          \
  FLAG_IN(upload_idle_seconds, server.limits.upload_idle_seconds, 0, kFlagMaxSeconds,              \
       "an upload (or a stream without its header) that sends nothing for this long is "           \
       "cancelled, freeing its slot (0: never)")                                                   \
  FLAG_IN(upload_min_bytes_per_second, server.limits.upload_min_bytes_per_second, 0, 1e12,         \
       "an upload slower than this, averaged over --upload_rate_window_seconds, is ended with"     \
       " DEADLINE_EXCEEDED, freeing its slot (0: no floor)")                                       \
  FLAG_IN(upload_rate_window_seconds, server.limits.upload_rate_window_seconds,                    \
          0, kFlagMaxSeconds,                                                                      \
       "the span over which --upload_min_bytes_per_second is measured (also the grace after "      \
       "the header)")                                                                              \
  FLAG_IN(write_timeout_seconds, server.limits.write_timeout_seconds, 0, kFlagMaxSeconds,          \
       "a call whose client does not read its responses for this long is cancelled and its "       \
       "worker freed (0: never)")                                                                  \
  FLAG_IN(handshake_timeout_seconds, server.limits.handshake_timeout_seconds, 0.001, 3600,         \
       "a connection that has not finished its TLS and HTTP/2 handshake by then is closed")        \
  FLAG_IN(connection_idle_seconds, server.limits.connection_idle_seconds, 0.001, 86400,            \
       "a connection with no call open for this long is closed (clients reconnect)")               \
                                                                                                   \
  /* Queue and upload bounds, prefetch, streamers, deadlines (ServerOptions::scheduling). */       \
  FLAG_IN(max_queue, server.scheduling.max_queue, 0, 1000000,                                      \
       "extractions waiting for a worker before RESOURCE_EXHAUSTED (0: 8 per worker, at least"     \
       " 16)")                                                                                     \
  FLAG_IN(max_uploads, server.scheduling.max_uploads, 0, 1000000,                                  \
       "image and PSF uploads in progress before RESOURCE_EXHAUSTED (0: as --max_queue)")          \
  FLAG_IN(realtime_reserve, server.scheduling.realtime_reserve, 0, 1000000,                        \
       "extra queue and upload slots that only realtime requests may use")                         \
  FLAG_IN(prefetch, server.scheduling.prefetch, 0, 1000,                                           \
       "frames read and decoded ahead per worker; 0: 8 per GPU worker (reading a .fits.gz r "      \
       "frame takes longer than a GPU extracts it), 2 for the CPU backend. The total is "          \
       "bounded by --prefetch_memory_bytes")                                                       \
  FLAG_IN(prefetch_memory_bytes, server.scheduling.prefetch_memory_bytes, 0, kFlagNoMax,           \
       "host memory for all frames decoded ahead, at 320 MB a frame (at least one frame per "      \
       "worker); 0: a quarter of the host's (or the cgroup's) memory")                             \
  FLAG_IN(streamers_per_worker, server.scheduling.streamers_per_worker, 0, 1000,                   \
       "threads streaming responses per worker (0: 4 per GPU worker, 2 for the CPU backend): "     \
       "each frame being streamed or written holds its decoded planes; more let a worker run "     \
       "ahead of slow readers and of the frame files the server writes")                           \
  FLAG_IN(no_deadline_horizon_seconds, server.scheduling.no_deadline_horizon_seconds,              \
          0, kFlagMaxSeconds,                                                                      \
       "a request without a deadline is scheduled as if due this long after its admission, so"     \
       " that requests with deadlines cannot hold it back forever (the call itself keeps no "      \
       "deadline); 0: after every request that has one")                                           \
                                                                                                   \
  /* Workers and backends (ServerOptions::workers). */                                             \
  FLAG(backend, server.workers.backend,                                                            \
       "auto (GPU if any, else CPU), cpu or cuda")                                                 \
  FLAG(gpu_devices, server.workers.gpu_devices,                                                    \
       "comma-separated CUDA devices to use (default: all)")                                       \
  FLAG_IN(backends_per_gpu, server.workers.backends_per_gpu, 0, WorkerOptions::kMaxBackendsPerGpu, \
       "workers per GPU, each with its own CUDA backend, so that frames overlap on the GPU "       \
       "(one frame's host preparation and last batch beside the other's kernels); 0: the "         \
       "default (docs/service.md), at most 4")                                                     \
  FLAG_IN(cpu_threads, server.workers.cpu_threads, 0, 4096,                                        \
       "host threads of the backends: CPU patches solved at once, CUDA host-side work (0: all"     \
       " cores); spexctl --cpu-threads is the same option for local extraction")                   \
  FLAG(cuda_module, server.workers.cuda_module,                                                    \
       "path of libspexd_cuda.so (default: next to spexd)")                                        \
                                                                                                   \
  /* Files read and written, and the PSF cache (ServerOptions::storage). */                        \
  FLAG(data_roots, server.storage.data_roots,                                                      \
       "comma-separated directories that request paths may point into")                            \
  FLAG(output_roots, server.storage.output_roots,                                                  \
       "comma-separated directories that server-side output (server_output_path) may be "          \
       "written under; empty disables server-side output")                                         \
  FLAG_IN(psf_cache_bytes, server.storage.psf_cache_bytes, 1, kFlagNoMax,                          \
       "host memory budget of the PSF and geometry cache")                                         \
  FLAG(preload_psfs, server.storage.preload_psfs,                                                  \
       "comma-separated PSF paths to load during warm-up")                                         \
                                                                                                   \
  /* Quality checks while serving (ServerOptions::shadow_parity). */                               \
  FLAG_IN(shadow_parity_fraction, server.shadow_parity.fraction, 0, 1,                             \
       "fraction of served frames of which one bundle is extracted again by the CPU reference"     \
       " backend and compared with what was served (docs/operations.md); 0: off")                  \
  FLAG_IN(shadow_parity_threads, server.shadow_parity.threads, 0, 4096,                            \
       "CPU threads of the shadow parity reference, at the lowest scheduling priority (0: one"     \
       " per core)")                                                                               \
                                                                                                   \
  /* The process: its log and its drain on SIGTERM. */                                             \
  FLAG(log_level, log_level,                                                                       \
       "debug, info, warning or error (others are refused)")                                       \
  FLAG_IN(drain_seconds, drain_seconds, 0, kFlagMaxSeconds,                                        \
       "grace period for work in flight on SIGTERM")

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SERVER_CONFIG_H_
