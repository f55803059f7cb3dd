// Channels to this host take no proxy from the environment (client::IsLocalTarget): a
// cluster's http_proxy cannot reach the client's loopback, where spexd listens by default.
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "client/lib/spexd_client.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

TEST(LocalTargetTest, LoopbackLocalhostAndUnixSocketsAreLocalNamesAndOtherHostsAreNot) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"127.0.0.1:50051", true},
      {"127.3.2.1:5", true},
      {"localhost:50051", true},
      {"LocalHost:1", true},
      {"localhost", true},
      {"dns:///localhost:50051", true},
      {"dns://8.8.8.8/127.0.0.1:5", true},
      {"dns:localhost:5", true},
      {"ipv4:127.0.0.1:1,127.0.0.2:2", true},
      {"[::1]:50051", true},
      {"ipv6:[::1]:5", true},
      {"[::ffff:127.0.0.1]:5", true},
      {"unix:/tmp/spexd.sock", true},
      {"unix-abstract:spexd", true},
      {"ipv4:127.0.0.1:1,10.0.0.1:2", false},
      {"10.1.2.3:50051", false},
      {"128.0.0.1:5", false},
      {"[2001:db8::1]:5", false},
      {"node01:50051", false},
      {"dns:///node01:50051", false},
      {"dns://x", false},
      {"", false},
  };
  for (const auto& [target, local] : cases) {
    EXPECT_EQ(client::IsLocalTarget(target), local) << target;
  }
}

// With every proxy variable pointing at a port that refuses connections, a client on the
// server's loopback address still reaches it (through the proxy it could not).
TEST(LocalTargetTest, AProxyInTheEnvironmentIsNotUsedOnLoopback) {
  // Set before any gRPC thread of this test's process runs (setenv is not thread-safe).
  const char* kNames[] = {"http_proxy", "https_proxy", "grpc_proxy"};
  for (const char* name : kNames) ::setenv(name, "http://127.0.0.1:1", 1);
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  client::ClientOptions o;
  o.max_attempts = 1;
  o.call_deadline_seconds = 10;
  auto c = Connect(*server, o);
  ASSERT_NE(c, nullptr);
  auto info = c->GetServerInfo();
  for (const char* name : kNames) ::unsetenv(name);  // for the tests after it in this process
  EXPECT_TRUE(info.ok()) << info.status();
}

}  // namespace
}  // namespace spexd::testing
