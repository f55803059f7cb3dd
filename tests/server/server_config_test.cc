// spexd's typed configuration (server/server_config.h): the text parsers refuse what
// they do not know, naming the flag, and the one validation refuses bad ranges.
#include "server/server_config.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace spexd::server {
namespace {

using ::testing::HasSubstr;

TEST(ServerConfigTest, LogLevelsAreParsedAndUnknownOnesRefused) {
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  for (const char* bad : {"banana", "", "INFO", "warn"}) {
    absl::StatusOr<LogLevel> level = ParseLogLevel(bad);
    ASSERT_FALSE(level.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(level.status()));
    EXPECT_THAT(level.status().message(), HasSubstr("--log_level"));
    EXPECT_THAT(level.status().message(), HasSubstr("debug, info, warning or error"));
  }
}

TEST(ServerConfigTest, BackendChoiceAndDevices) {
  EXPECT_FALSE(ParseBackendChoice("auto")->has_value());
  EXPECT_EQ(**ParseBackendChoice("cpu"), core::BackendKind::kCpu);
  EXPECT_EQ(**ParseBackendChoice("cuda"), core::BackendKind::kCuda);
  absl::StatusOr<std::optional<core::BackendKind>> bad = ParseBackendChoice("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--backend must be auto, cpu or cuda"));
  EXPECT_EQ(*ParseDeviceList(" 0, 2 ,"), (std::vector<int>{0, 2}));
  EXPECT_TRUE(ParseDeviceList("")->empty());
  EXPECT_THAT(ParseDeviceList("0,x").status().message(), HasSubstr("--gpu_devices"));
  EXPECT_FALSE(ParseDeviceList("-1").ok());
}

TEST(ServerConfigTest, DefaultsAreValidAndBadRangesAreRefused) {
  EXPECT_TRUE(ValidateServerConfig(ServerConfig{}).ok());
  struct Case {
    void (*set)(ServerConfig&);
    const char* flag;
  };
  const Case cases[] = {
      {[](ServerConfig& c) { c.server.max_queue = -1; }, "--max_queue"},
      {[](ServerConfig& c) { c.server.max_uploads = -1; }, "--max_uploads"},
      {[](ServerConfig& c) { c.server.limits.write_timeout_seconds = -1; }, "timeouts"},
      {[](ServerConfig& c) { c.server.prefetch = -2; }, "--prefetch"},
      {[](ServerConfig& c) { c.server.streamers_per_worker = -1; }, "--streamers_per_worker"},
      {[](ServerConfig& c) { c.server.backends_per_gpu = -1; }, "--backends_per_gpu"},
      {[](ServerConfig& c) { c.server.backends_per_gpu = 5; }, "--backends_per_gpu"},
      {[](ServerConfig& c) { c.server.limits.max_request_bytes = 1 << 20; }, "--max_request_bytes"},
      {[](ServerConfig& c) { c.server.limits.max_message_bytes = 128 << 20; }, "--max_message_bytes"},
      {[](ServerConfig& c) { c.server.cpu_threads = -3; }, "--cpu_threads"},
      {[](ServerConfig& c) { c.server.limits.handshake_timeout_seconds = 0; },
       "--handshake_timeout_seconds"},
      {[](ServerConfig& c) { c.server.limits.handshake_timeout_seconds = std::nan(""); },
       "--handshake_timeout_seconds"},
      {[](ServerConfig& c) { c.server.limits.connection_idle_seconds = -1; },
       "--connection_idle_seconds"},
      {[](ServerConfig& c) { c.drain_seconds = -1; }, "--drain_seconds"},
      {[](ServerConfig& c) { c.server.shadow_parity.fraction = 1.5; }, "--shadow_parity_fraction"},
      {[](ServerConfig& c) { c.server.shadow_parity.fraction = -0.1; }, "--shadow_parity_fraction"},
      {[](ServerConfig& c) { c.server.shadow_parity.fraction = std::nan(""); }, "--shadow_parity_fraction"},
      {[](ServerConfig& c) { c.server.shadow_parity.threads = -1; }, "--shadow_parity_threads"},
      {[](ServerConfig& c) { c.server.no_deadline_horizon_seconds = -1; }, "--no_deadline_horizon_seconds"},
      {[](ServerConfig& c) { c.server.no_deadline_horizon_seconds = std::nan(""); },
       "--no_deadline_horizon_seconds"},
  };
  for (const Case& k : cases) {
    ServerConfig c;
    k.set(c);
    absl::Status s = ValidateServerConfig(c);
    ASSERT_FALSE(s.ok()) << k.flag;
    EXPECT_TRUE(absl::IsInvalidArgument(s));
    EXPECT_THAT(s.message(), HasSubstr(k.flag));
  }
}

TEST(ServerConfigTest, AuthTokenIsTrimmedAndAnEmptyFileRefused) {
  const std::string path = ::testing::TempDir() + "/server_config_token";
  std::ofstream(path) << "  s3cret\n";
  EXPECT_EQ(*ReadAuthToken(path), "s3cret");
  std::ofstream(path) << " \n";
  EXPECT_THAT(ReadAuthToken(path).status().message(), HasSubstr("empty"));
  std::remove(path.c_str());
  EXPECT_THAT(ReadAuthToken(path).status().message(), HasSubstr("cannot read"));
}

}  // namespace
}  // namespace spexd::server
