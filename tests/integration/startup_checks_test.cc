// What the real spexd refuses at startup, and how: a port another server serves (gRPC's
// and the metrics endpoint's), flags out of range, output roots it cannot write, TLS files
// that are not PEM, a --config that is not a regular file. Each refusal exits non-zero at
// once with a startup_failed line that says why; the first server keeps serving.
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/integration/spawned_server.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using ::testing::HasSubstr;

// The metrics port of the "listening" log line.
int MetricsPortInLog(const std::string& log) {
  const std::string key = "\"metrics_port\":";
  const std::size_t at = log.find(key);
  return at == std::string::npos ? 0 : std::atoi(log.c_str() + at + key.size());
}

// A server given `args` must exit with status 1 within a few seconds, its log saying
// every one of `says`.
void ExpectStartRefused(const std::vector<std::string>& args, const std::vector<std::string>& says) {
  SpawnedServer spexd(args);
  const int code = spexd.WaitForExit(30);
  std::string shown;
  for (const std::string& a : args) shown += " " + a;
  EXPECT_EQ(code, 1) << shown << "\n" << spexd.Log();
  EXPECT_THAT(spexd.Log(), HasSubstr("startup_failed")) << shown;
  for (const std::string& s : says) EXPECT_THAT(spexd.Log(), HasSubstr(s)) << shown;
}

// Whether the server on `port` answers a GetServerInfo call.
bool AnswersServerInfo(int port) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Admin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetServerInfoRequest request;
  v1::ServerInfo info;
  return stub->GetServerInfo(&context, request, &info).ok();
}

// gRPC sets SO_REUSEPORT by default: a second server on the first one's port used to bind
// too, log "serving" and take about half of the connections.
TEST(StartupChecksTest, ASecondServerOnAServedPortExitsSayingSo) {
  SpawnedServer first({"--metrics_listen=127.0.0.1:0"});
  const int port = first.WaitForPort(60);
  ASSERT_GT(port, 0) << first.Log();
  const int metrics_port = MetricsPortInLog(first.Log());
  ASSERT_GT(metrics_port, 0) << first.Log();

  SpawnedServer second({}, {}, "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(second.WaitForExit(30), 1) << second.Log();
  EXPECT_THAT(second.Log(), HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(second.Log(), HasSubstr("another process is serving it"));
  EXPECT_THAT(second.Log(), ::testing::Not(HasSubstr("\"event\":\"serving\"")));

  // The metrics endpoint: the same refusal, from its own bind.
  ExpectStartRefused({"--metrics_listen=127.0.0.1:" + std::to_string(metrics_port)},
                {"cannot serve metrics on 127.0.0.1:" + std::to_string(metrics_port),
                 "another process is serving it"});
  EXPECT_TRUE(AnswersServerInfo(port)) << "the first server stopped answering";
}

TEST(StartupChecksTest, FlagsOutOfRangeAreRefusedNamingTheFlag) {
  // gRPC would have listened on 99999 mod 65536 = 34463.
  ExpectStartRefused({"--listen=127.0.0.1:99999"}, {"--listen=127.0.0.1:99999", "0..65535"});
  ExpectStartRefused({"--metrics_listen=127.0.0.1:65536"}, {"--metrics_listen"});
  ExpectStartRefused({"--max_upload_bytes=0"}, {"--max_upload_bytes must be at least 1 (got 0)"});
  ExpectStartRefused({"--psf_cache_bytes=-1"}, {"--psf_cache_bytes must be at least 1 (got -1)"});
  ExpectStartRefused({"--upload_idle_seconds=inf"}, {"--upload_idle_seconds"});
}

TEST(StartupChecksTest, OutputRootsMustBeWritable) {
  ExpectStartRefused({"--output_roots=/proc"}, {"--output_roots /proc is not writable"});
  if (::geteuid() != 0) {  // root writes a 0555 directory anyway
    const std::string dir = MakeTempDir() + "/read-only";
    ASSERT_EQ(::mkdir(dir.c_str(), 0555), 0);
    ExpectStartRefused({"--output_roots=" + dir}, {"is not writable", "Permission denied"});
  }
  // A writable root is left as it was found: the probe file is gone.
  const std::string out = MakeTempDir();
  SpawnedServer spexd({"--output_roots=" + out});
  ASSERT_GT(spexd.WaitForPort(60), 0) << spexd.Log();
  EXPECT_EQ(RunCommand("ls -A " + out).output, "");
}

TEST(StartupChecksTest, TheWholeFilesystemAsARootIsWarnedAbout) {
  SpawnedServer spexd({"--data_roots=/"});
  ASSERT_GT(spexd.WaitForPort(60), 0) << spexd.Log();
  EXPECT_THAT(spexd.Log(), HasSubstr("\"event\":\"root_is_whole_filesystem\""));
  EXPECT_THAT(spexd.Log(), HasSubstr("--data_roots includes /"));
}

TEST(StartupChecksTest, TlsFilesThatAreNotPemAreNamed) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteBytes(dir + "/cert.txt", "not a certificate\n"));
  ASSERT_TRUE(WriteBytes(dir + "/key.txt", "not a key\n"));
  ExpectStartRefused({"--tls_cert=" + dir + "/cert.txt", "--tls_key=" + dir + "/key.txt"},
                {"--tls_cert " + dir + "/cert.txt holds no PEM certificate"});
  ExpectStartRefused({"--tls_cert=" + dir, "--tls_key=" + dir + "/key.txt"},
                {"cannot read --tls_cert " + dir + ": it is a directory"});
}

TEST(StartupChecksTest, AConfigThatIsNotARegularFileIsRefusedAtOnce) {
  const std::string dir = MakeTempDir();
  const std::string fifo = dir + "/spexd.conf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectStartRefused({"--config=" + fifo}, {"cannot read config file " + fifo + ": it is a FIFO"});
  ExpectStartRefused({"--config=" + dir}, {"it is a directory"});
  ExpectStartRefused({"--config=/dev/zero"}, {"it is a character device"});
}

}  // namespace
}  // namespace spexd::testing
