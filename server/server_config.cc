#include "server/server_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"

namespace spexd::server {
namespace {

absl::Status Bad(absl::string_view message) { return absl::InvalidArgumentError(message); }

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "warning") return LogLevel::kWarning;
  if (text == "error") return LogLevel::kError;
  return Bad(absl::StrCat("--log_level must be debug, info, warning or error (got '", text, "')"));
}

absl::StatusOr<std::optional<core::BackendKind>> ParseBackendChoice(absl::string_view text) {
  if (text == "auto") return std::optional<core::BackendKind>();
  absl::StatusOr<core::BackendKind> kind = core::ParseBackendKind(text);
  if (!kind.ok()) return Bad(absl::StrCat("--backend must be auto, cpu or cuda (got '", text, "')"));
  return std::optional<core::BackendKind>(*kind);
}

std::vector<std::string> SplitList(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseDeviceList(absl::string_view text) {
  std::vector<int> devices;
  for (const std::string& d : SplitList(text)) {
    int device = 0;
    if (!absl::SimpleAtoi(d, &device) || device < 0) {
      return Bad(absl::StrCat("--gpu_devices: bad device '", d,
                              "' (CUDA device ordinals, comma-separated: 0,1,...)"));
    }
    devices.push_back(device);
  }
  return devices;
}

absl::StatusOr<std::string> ReadAuthToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Bad(absl::StrCat("cannot read --auth_token_file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) return Bad("--auth_token_file is empty");
  return token;
}

absl::Status ValidateServerConfig(const ServerConfig& config) {
  const ServerOptions& o = config.server;
  if (o.workers.cpu_threads < 0) return Bad("--cpu_threads must not be negative (0: all cores)");
  if (o.scheduling.max_queue < 0) return Bad("--max_queue must be 0 (automatic) or positive");
  if (o.scheduling.max_uploads < 0 || o.scheduling.realtime_reserve < 0 ||
      o.limits.upload_idle_seconds < 0 ||
      o.limits.write_timeout_seconds < 0 || o.limits.upload_min_bytes_per_second < 0 ||
      o.limits.upload_rate_window_seconds < 0) {
    return Bad("--max_uploads, --realtime_reserve, the timeouts and the upload rate floor "
               "must not be negative");
  }
  if (o.scheduling.prefetch < 0 || o.scheduling.prefetch_memory_bytes < 0) {
    return Bad("--prefetch and --prefetch_memory_bytes must not be negative (0: the default)");
  }
  if (o.workers.backends_per_gpu < 0 ||
      o.workers.backends_per_gpu > WorkerOptions::kMaxBackendsPerGpu) {
    return Bad(absl::StrCat("--backends_per_gpu must be between 0 (the default) and ",
                            WorkerOptions::kMaxBackendsPerGpu));
  }
  if (o.scheduling.streamers_per_worker < 0) {
    return Bad("--streamers_per_worker must not be negative (0: the default)");
  }
  // Written so that NaN is refused too.
  if (!(o.scheduling.no_deadline_horizon_seconds >= 0)) {
    return Bad("--no_deadline_horizon_seconds must not be negative (0: no horizon)");
  }
  // Written so that NaN is refused too.
  if (!(o.limits.handshake_timeout_seconds > 0 && o.limits.handshake_timeout_seconds <= 3600) ||
      !(o.limits.connection_idle_seconds > 0 && o.limits.connection_idle_seconds <= 86400)) {
    return Bad("--handshake_timeout_seconds must be in (0, 3600] and --connection_idle_seconds "
               "in (0, 86400]");
  }
  if (o.limits.max_request_bytes < (64 << 20)) return Bad("--max_request_bytes must be at least 64 MiB");
  if (o.limits.max_message_bytes < (1 << 20) || o.limits.max_message_bytes > (64 << 20)) {
    return Bad("--max_message_bytes must be between 1 MiB and 64 MiB");
  }
  // Written so that NaN is refused too.
  if (!(o.shadow_parity.fraction >= 0 && o.shadow_parity.fraction <= 1)) {
    return Bad("--shadow_parity_fraction must be in [0, 1] (0: off)");
  }
  if (o.shadow_parity.threads < 0) {
    return Bad("--shadow_parity_threads must not be negative (0: one per core)");
  }
  if (config.drain_seconds < 0) return Bad("--drain_seconds must not be negative");
  return absl::OkStatus();
}

std::string FlagCodec<std::vector<std::string>>::Show(const std::vector<std::string>& value) {
  return absl::StrJoin(value, ",");
}
absl::Status FlagCodec<std::vector<std::string>>::Set(const Flag& flag,
                                                      std::vector<std::string>* value) {
  *value = SplitList(flag);
  return absl::OkStatus();
}

std::string FlagCodec<std::vector<int>>::Show(const std::vector<int>& value) {
  return absl::StrJoin(value, ",");
}
absl::Status FlagCodec<std::vector<int>>::Set(const Flag& flag, std::vector<int>* value) {
  SPEXD_ASSIGN_OR_RETURN(*value, ParseDeviceList(flag));
  return absl::OkStatus();
}

std::string FlagCodec<std::optional<core::BackendKind>>::Show(
    const std::optional<core::BackendKind>& value) {
  return value ? std::string(core::Name(*value)) : std::string("auto");
}
absl::Status FlagCodec<std::optional<core::BackendKind>>::Set(
    const Flag& flag, std::optional<core::BackendKind>* value) {
  SPEXD_ASSIGN_OR_RETURN(*value, ParseBackendChoice(flag));
  return absl::OkStatus();
}

std::string FlagCodec<LogLevel>::Show(LogLevel value) {
  switch (value) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}
absl::Status FlagCodec<LogLevel>::Set(const Flag& flag, LogLevel* value) {
  SPEXD_ASSIGN_OR_RETURN(*value, ParseLogLevel(flag));
  return absl::OkStatus();
}

absl::Status TokenFileCodec::Set(const Flag& path, std::string* token) {
  if (path.empty()) return absl::OkStatus();
  SPEXD_ASSIGN_OR_RETURN(*token, ReadAuthToken(path));
  return absl::OkStatus();
}

}  // namespace spexd::server
