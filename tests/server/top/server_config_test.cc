// spexd's typed configuration (server/server_config.h): the text parsers refuse what
// they do not know, naming the flag, and the one validation refuses bad ranges.
#include "server/server_config.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

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
      {[](ServerConfig& c) { c.server.scheduling.max_queue = -1; }, "--max_queue"},
      {[](ServerConfig& c) { c.server.scheduling.max_uploads = -1; }, "--max_uploads"},
      {[](ServerConfig& c) { c.server.limits.write_timeout_seconds = -1; },
       "--write_timeout_seconds"},
      {[](ServerConfig& c) { c.server.scheduling.prefetch = -2; }, "--prefetch"},
      {[](ServerConfig& c) { c.server.scheduling.streamers_per_worker = -1; },
       "--streamers_per_worker"},
      {[](ServerConfig& c) { c.server.workers.backends_per_gpu = -1; }, "--backends_per_gpu"},
      {[](ServerConfig& c) { c.server.workers.backends_per_gpu = 5; }, "--backends_per_gpu"},
      {[](ServerConfig& c) { c.server.limits.max_request_bytes = 1 << 20; }, "--max_request_bytes"},
      {[](ServerConfig& c) { c.server.limits.max_message_bytes = 128 << 20; }, "--max_message_bytes"},
      {[](ServerConfig& c) { c.server.workers.cpu_threads = -3; }, "--cpu_threads"},
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
      {[](ServerConfig& c) { c.server.scheduling.no_deadline_horizon_seconds = -1; },
       "--no_deadline_horizon_seconds"},
      {[](ServerConfig& c) { c.server.scheduling.no_deadline_horizon_seconds = std::nan(""); },
       "--no_deadline_horizon_seconds"},
      // Ports: gRPC would listen on 99999 mod 65536 = 34463.
      {[](ServerConfig& c) { c.server.network.listen = "127.0.0.1:99999"; }, "--listen"},
      {[](ServerConfig& c) { c.server.network.listen = "127.0.0.1:-1"; }, "--listen"},
      {[](ServerConfig& c) { c.server.network.listen = "127.0.0.1"; }, "--listen"},
      {[](ServerConfig& c) { c.server.network.listen = "[::1]:65536"; }, "--listen"},
      {[](ServerConfig& c) { c.server.network.metrics_listen = "127.0.0.1:70000"; },
       "--metrics_listen"},
      // Byte sizes and bounds that are no limit at all, or a negative budget.
      {[](ServerConfig& c) { c.server.limits.max_upload_bytes = 0; }, "--max_upload_bytes"},
      {[](ServerConfig& c) { c.server.limits.max_image_pixels = -5; }, "--max_image_pixels"},
      {[](ServerConfig& c) { c.server.storage.psf_cache_bytes = -1; }, "--psf_cache_bytes"},
      {[](ServerConfig& c) { c.server.storage.psf_cache_bytes = 0; }, "--psf_cache_bytes"},
      {[](ServerConfig& c) { c.server.scheduling.prefetch_memory_bytes = -1; },
       "--prefetch_memory_bytes"},
      {[](ServerConfig& c) { c.server.limits.upload_idle_seconds = INFINITY; },
       "--upload_idle_seconds"},
      {[](ServerConfig& c) { c.server.limits.upload_min_bytes_per_second = std::nan(""); },
       "--upload_min_bytes_per_second"},
      {[](ServerConfig& c) { c.server.workers.cpu_threads = 1 << 20; }, "--cpu_threads"},
      {[](ServerConfig& c) { c.drain_seconds = std::nan(""); }, "--drain_seconds"},
  };
  for (const Case& k : cases) {
    ServerConfig c;
    k.set(c);
    absl::Status s = ValidateServerConfig(c);
    ASSERT_FALSE(s.ok()) << k.flag;
    EXPECT_TRUE(absl::IsInvalidArgument(s));
    EXPECT_THAT(s.message(), HasSubstr(k.flag));
  }
  // What the ranges still take: a free port, IPv6, local sockets, the bounds themselves.
  for (const char* listen : {"127.0.0.1:0", "[::1]:65535", "0.0.0.0:1", "localhost:50051",
                             "unix:///run/spexd.sock", "unix-abstract:spexd"}) {
    ServerConfig c;
    c.server.network.listen = listen;
    EXPECT_TRUE(ValidateServerConfig(c).ok()) << listen << ": " << ValidateServerConfig(c);
  }
  ServerConfig edges;
  edges.server.limits.max_upload_bytes = 1;
  edges.server.network.metrics_listen = "";  // no endpoint
  edges.server.workers.backends_per_gpu = WorkerOptions::kMaxBackendsPerGpu;
  edges.server.shadow_parity.fraction = 1;
  EXPECT_TRUE(ValidateServerConfig(edges).ok()) << ValidateServerConfig(edges);
  ServerConfig port;
  port.server.network.listen = "127.0.0.1:99999";
  EXPECT_THAT(ValidateServerConfig(port).message(), HasSubstr("a port in 0..65535"));
  ServerConfig upload;
  upload.server.limits.max_upload_bytes = 0;
  EXPECT_EQ(ValidateServerConfig(upload).message(),
            "--max_upload_bytes must be at least 1 (got 0)");
}

// main.cc gives each flag of SPEXD_SERVER_FLAGS its member's default shown as text, and
// reads the flag back into the member: spexd started without flags must run with
// ServerConfig{} exactly, and no two entries may claim one name.
TEST(ServerConfigTest, EveryFlagReadsItsDefaultBackAsTheMembersDefault) {
  const ServerConfig defaults;
  std::set<std::string> names;
  int flags = 0;
#define SPEXD_CHECK_FLAG_AS(codec, name, member, help)                                    \
  {                                                                                      \
    ++flags;                                                                             \
    EXPECT_TRUE(names.insert(#name).second) << "--" #name " listed twice";               \
    EXPECT_GT(std::string(help).size(), 10u) << "--" #name;                              \
    ServerConfig read;                                                                   \
    read.member = {};                                                                    \
    const absl::Status s = codec::Set(codec::Show(defaults.member), &read.member);       \
    EXPECT_TRUE(s.ok()) << "--" #name ": " << s;                                         \
    EXPECT_TRUE(read.member == defaults.member) << "--" #name " does not read back";     \
  }
#define SPEXD_CHECK_FLAG(name, member, help) \
  SPEXD_CHECK_FLAG_AS(SPEXD_FLAG_CODEC(member), name, member, help)
#define SPEXD_CHECK_FLAG_IN(name, member, lo, hi, help) SPEXD_CHECK_FLAG(name, member, help)
  SPEXD_SERVER_FLAGS(SPEXD_CHECK_FLAG, SPEXD_CHECK_FLAG_AS, SPEXD_CHECK_FLAG_IN)
#undef SPEXD_CHECK_FLAG
#undef SPEXD_CHECK_FLAG_AS
#undef SPEXD_CHECK_FLAG_IN
  EXPECT_EQ(flags, 36);  // every flag of spexd but --config (docs/service.md's table)
  EXPECT_TRUE(names.count("listen") && names.count("auth_token_file") && names.count("log_level"));
}

// The flags whose text is not the member's own type: what each reads and shows.
TEST(ServerConfigTest, TextFlagsReadAndShowTheirMembers) {
  std::vector<std::string> roots;
  ASSERT_TRUE(FlagCodec<std::vector<std::string>>::Set(" /a, /b ,", &roots).ok());
  EXPECT_EQ(roots, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(FlagCodec<std::vector<std::string>>::Show(roots), "/a,/b");
  std::vector<int> devices;
  EXPECT_THAT(FlagCodec<std::vector<int>>::Set("0,x", &devices).message(),
              HasSubstr("--gpu_devices: bad device 'x'"));
  ASSERT_TRUE(FlagCodec<std::vector<int>>::Set("1,3", &devices).ok());
  EXPECT_EQ(FlagCodec<std::vector<int>>::Show(devices), "1,3");
  std::optional<core::BackendKind> backend;
  ASSERT_TRUE(FlagCodec<std::optional<core::BackendKind>>::Set("cuda", &backend).ok());
  EXPECT_EQ(FlagCodec<std::optional<core::BackendKind>>::Show(backend), "cuda");
  EXPECT_EQ(FlagCodec<std::optional<core::BackendKind>>::Show(std::nullopt), "auto");
  LogLevel level = LogLevel::kInfo;
  EXPECT_THAT(FlagCodec<LogLevel>::Set("banana", &level).message(),
              HasSubstr("--log_level must be debug, info, warning or error"));
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    ASSERT_TRUE(FlagCodec<LogLevel>::Set(FlagCodec<LogLevel>::Show(l), &level).ok());
    EXPECT_EQ(level, l);
  }
  const std::string path = ::testing::TempDir() + "/server_config_token_flag";
  std::ofstream(path) << "t0ken\n";
  std::string token = "unchanged";
  ASSERT_TRUE(TokenFileCodec::Set("", &token).ok());  // no file: no token
  EXPECT_EQ(token, "unchanged");
  ASSERT_TRUE(TokenFileCodec::Set(path, &token).ok());
  EXPECT_EQ(token, "t0ken");
  EXPECT_EQ(TokenFileCodec::Show(token), "");  // the token is never shown
  std::remove(path.c_str());
  EXPECT_THAT(TokenFileCodec::Set(path, &token).message(), HasSubstr("cannot read"));
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
