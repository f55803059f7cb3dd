// spexd's configuration as one typed value: the ServerOptions that SpexdServer runs with,
// plus what main itself uses (log level, drain grace). main.cc fills it from its flags
// (the --config file merged in first, config_file.h); the text-to-value parsers and
// the one validation live here, so that every refusal reads the same and is unit
// tested (tests/server/server_config_test.cc). Nothing here reads a flag or the
// environment (style.md: flags only next to main).
#ifndef SPEXD_SERVER_SERVER_CONFIG_H_
#define SPEXD_SERVER_SERVER_CONFIG_H_

#include <optional>
#include <string>
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

// Every range check of the configuration, in one place: negative counts and timeouts,
// message and request size bounds. INVALID_ARGUMENT names the flag.
absl::Status ValidateServerConfig(const ServerConfig& config);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SERVER_CONFIG_H_
