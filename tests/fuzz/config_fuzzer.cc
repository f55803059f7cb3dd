// libFuzzer target: spexd's --config file, as main.cc reads it: the text into flag
// arguments (server/platform/config_file.h, ConfigTextToArgs), each argument parsed as its
// Abseil flag parses it (absl::ParseFlag on the flag's type) and set through its codec into
// a ServerConfig (server/server_config.h, the SPEXD_SERVER_FLAGS list), then the one
// validation (ValidateServerConfig). Checked: every argument is a flag; the arguments
// written back as `key = value` lines parse to the same arguments; and every member of an
// accepted configuration shows as a flag text that sets it to the same value (what --help
// shows as a default reads back as that default). --auth_token_file is left out: its codec
// reads the file it names, and a fuzzed path could name a FIFO or /dev/zero.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/flags/marshalling.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/platform/config_file.h"
#include "server/server_config.h"

namespace {

using spexd::server::ServerConfig;

template <typename T>
bool Same(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a == b || (std::isnan(a) && std::isnan(b));
  } else {
    return a == b;
  }
}

// Sets the member of `config` that flag `name` names from `value`, as main.cc does.
// False: no such flag here (absl would refuse it) or the text does not parse.
bool SetFlag(const std::string& name, const std::string& value, ServerConfig* config,
             absl::Status* status) {
#define SPEXD_FUZZ_SET_AS(codec, flag, member, help)                         \
  if (name == #flag) {                                                        \
    if constexpr (std::is_same_v<codec, ::spexd::server::TokenFileCodec>) {   \
      return false;                                                           \
    } else {                                                                  \
      codec::Flag parsed{};                                                   \
      std::string error;                                                      \
      if (!absl::ParseFlag(value, &parsed, &error)) return false;             \
      *status = codec::Set(parsed, &config->member);                          \
      return true;                                                            \
    }                                                                         \
  }
#define SPEXD_FUZZ_SET(flag, member, help) \
  SPEXD_FUZZ_SET_AS(SPEXD_FLAG_CODEC(member), flag, member, help)
#define SPEXD_FUZZ_SET_IN(flag, member, lo, hi, help) SPEXD_FUZZ_SET(flag, member, help)
  SPEXD_SERVER_FLAGS(SPEXD_FUZZ_SET, SPEXD_FUZZ_SET_AS, SPEXD_FUZZ_SET_IN)
#undef SPEXD_FUZZ_SET
#undef SPEXD_FUZZ_SET_AS
#undef SPEXD_FUZZ_SET_IN
  return false;
}

// Every member shown as its flag's text and set again reads the same.
void CheckShowSetsTheSame(const ServerConfig& config) {
#define SPEXD_FUZZ_ROUND_AS(codec, flag, member, help)                       \
  if constexpr (!std::is_same_v<codec, ::spexd::server::TokenFileCodec>) {  \
    auto copy = config.member;                                               \
    if (!codec::Set(codec::Show(config.member), &copy).ok()) __builtin_trap(); \
    if (!Same(copy, config.member)) __builtin_trap();                       \
  }
#define SPEXD_FUZZ_ROUND(flag, member, help) \
  SPEXD_FUZZ_ROUND_AS(SPEXD_FLAG_CODEC(member), flag, member, help)
#define SPEXD_FUZZ_ROUND_IN(flag, member, lo, hi, help) SPEXD_FUZZ_ROUND(flag, member, help)
  SPEXD_SERVER_FLAGS(SPEXD_FUZZ_ROUND, SPEXD_FUZZ_ROUND_AS, SPEXD_FUZZ_ROUND_IN)
#undef SPEXD_FUZZ_ROUND
#undef SPEXD_FUZZ_ROUND_AS
#undef SPEXD_FUZZ_ROUND_IN
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto args = spexd::server::ConfigTextToArgs(text, "fuzz.conf");
  if (!args.ok()) return 0;
  std::string again;
  for (const std::string& arg : *args) {
    if (arg.rfind("--", 0) != 0) __builtin_trap();  // every result is a flag
    const std::size_t eq = arg.find('=');
    if (eq == std::string::npos) __builtin_trap();
    absl::StrAppend(&again, arg.substr(0, eq), " = ", arg.substr(eq + 1), "\n");
  }
  auto reread = spexd::server::ConfigTextToArgs(again, "again.conf");
  if (!reread.ok() || *reread != *args) __builtin_trap();

  ServerConfig config;
  for (const std::string& arg : *args) {
    const std::size_t eq = arg.find('=');
    absl::Status set;
    if (!SetFlag(arg.substr(2, eq - 2), arg.substr(eq + 1), &config, &set)) return 0;
    if (!set.ok()) return 0;
  }
  if (!spexd::server::ValidateServerConfig(config).ok()) return 0;
  CheckShowSetsTheSame(config);
  return 0;
}
