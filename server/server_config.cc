#include "server/server_config.h"

#include <limits>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "server/platform/listen_address.h"
#include "server/platform/small_file.h"

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
  // A token is a line; the bound only keeps a wrong file (a device, a log) out of memory.
  auto text = ReadSmallFile(path, int64_t{64} << 10, "--auth_token_file");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return Bad("--auth_token_file is empty");
  return token;
}

namespace {

template <typename T>
absl::Status InRange(const char* name, T value, T lo, T hi) {
  // Written so that NaN is refused too.
  if (value >= lo && value <= hi) return absl::OkStatus();
  if constexpr (std::is_integral_v<T>) {
    if (hi == std::numeric_limits<T>::max()) {
      return Bad(absl::StrCat("--", name, " must be at least ", lo, " (got ", value, ")"));
    }
  }
  return Bad(absl::StrCat("--", name, " must be between ", lo, " and ", hi, " (got ", value, ")"));
}

}  // namespace

absl::Status CheckFlagRanges(const ServerConfig& config) {
#define SPEXD_RANGE_NONE(...)
#define SPEXD_RANGE_IN(name, member, lo, hi, help)                                   \
  {                                                                                 \
    using T = std::decay_t<decltype(config.member)>;                                \
    SPEXD_RETURN_IF_ERROR(                                                          \
        InRange<T>(#name, config.member, static_cast<T>(lo), static_cast<T>(hi)));  \
  }
  SPEXD_SERVER_FLAGS(SPEXD_RANGE_NONE, SPEXD_RANGE_NONE, SPEXD_RANGE_IN)
#undef SPEXD_RANGE_NONE
#undef SPEXD_RANGE_IN
  return absl::OkStatus();
}

absl::Status ValidateServerConfig(const ServerConfig& config) {
  const ServerOptions& o = config.server;
  SPEXD_RETURN_IF_ERROR(CheckFlagRanges(config));
  SPEXD_RETURN_IF_ERROR(CheckListenAddress("--listen", o.network.listen));
  if (!o.network.metrics_listen.empty()) {
    SPEXD_RETURN_IF_ERROR(CheckListenAddress("--metrics_listen", o.network.metrics_listen));
  }
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
