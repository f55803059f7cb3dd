// Connections that do nothing cannot hold the server's descriptors: a TCP connection that
// never completes its handshake is closed after --handshake_timeout_seconds (gRPC's own
// default kept one ~120 s; 2,000 such sockets held 2,011 descriptors), and a connection
// with no call open after --connection_idle_seconds, the client reconnecting on its next
// call.
#include <grpcpp/channel.h>
#include <grpcpp/create_channel.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

TEST(ConnectionLimitsTest, SilentConnectionsAreClosedAfterTheHandshakeTimeout) {
  server::ServerOptions o = TestServerOptions();
  ASSERT_LE(o.limits.handshake_timeout_seconds, 10.0);  // the default
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  // Several at once, sending nothing; a loaded machine gets 3x the timeout.
  constexpr int kSockets = 8;
  const double limit = 3 * o.limits.handshake_timeout_seconds;
  std::vector<std::future<RawHttpResult>> silent;
  for (int i = 0; i < kSockets; ++i) {
    silent.push_back(std::async(std::launch::async, [&] {
      return RawHttpExchange(server->port(), "", limit + 5);
    }));
  }
  for (auto& f : silent) {
    const RawHttpResult r = f.get();
    ASSERT_TRUE(r.connected);
    EXPECT_TRUE(r.closed) << "still open after " << r.seconds << " s";
    EXPECT_LT(r.seconds, limit);
    std::printf("silent connection closed after %.1f s\n", r.seconds);
  }
  // The server serves on.
  auto c = Connect(*server);
  auto info = c->GetServerInfo();
  EXPECT_TRUE(info.ok()) << info.status();
}

TEST(ConnectionLimitsTest, AConnectionWithNoCallIsClosedAndTheClientReconnects) {
  server::ServerOptions o = TestServerOptions();
  o.limits.connection_idle_seconds = 1;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                     grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // The server's GOAWAY takes the channel out of READY.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (channel->GetState(false) == GRPC_CHANNEL_READY &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY) << "idle connection kept open";
  // A client's next call reconnects.
  auto c = Connect(*server);
  auto info = c->GetServerInfo();
  EXPECT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
}

}  // namespace
}  // namespace spexd::testing
