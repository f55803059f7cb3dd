// TLS and mutual TLS on loopback, with a throw-away CA made by the openssl CLI.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// Makes ca.pem, server.{pem,key} (SAN DNS:spexd.test) and client.{pem,key}; false if
// the openssl command is unavailable or fails.
bool MakeCertificates(const std::string& dir) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script = absl::StrCat(
      "cd ", dir, " && command -v openssl >/dev/null && {",
      " openssl req -x509 ", key, " -keyout ca.key -out ca.pem -days 2 -subj /CN=spexd-test-ca &&",
      " openssl req ", key, " -keyout server.key -out server.csr -subj /CN=spexd.test &&",
      " printf 'subjectAltName=DNS:spexd.test\\n' > san.ext &&",
      " openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial",
      "   -out server.pem -days 2 -extfile san.ext &&",
      " openssl req ", key, " -keyout client.key -out client.csr -subj /CN=pipeline &&",
      " openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial",
      "   -out client.pem -days 2; } >/dev/null 2>&1");
  return std::system(script.c_str()) == 0;
}

TEST(TlsTest, MutualTlsAcceptsOnlyClientsWithACertificateFromTheCa) {
  const std::string dir = MakeTempDir();
  if (!MakeCertificates(dir)) GTEST_SKIP() << "openssl CLI not available to make test certificates";
  server::ServerOptions o = TestServerOptions();
  o.security.tls_cert_file = dir + "/server.pem";
  o.security.tls_key_file = dir + "/server.key";
  o.security.tls_client_ca_file = dir + "/ca.pem";
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);

  client::ClientOptions good;
  good.tls = true;
  good.tls_root_certs = ReadBytes(dir + "/ca.pem");
  good.tls_client_cert = ReadBytes(dir + "/client.pem");
  good.tls_client_key = ReadBytes(dir + "/client.key");
  good.tls_server_name = "spexd.test";
  good.max_attempts = 1;
  auto c = Connect(*server, good);
  auto info = c->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->tls());
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf");
  ASSERT_TRUE(psf.ok()) << psf.status();
  EXPECT_TRUE(RemoteExtractFrame(*c, SmallHeader(psf->id()), &Inputs().frame_bytes).ok());

  client::ClientOptions no_cert = good;
  no_cert.tls_client_cert.clear();
  no_cert.tls_client_key.clear();
  no_cert.call_deadline_seconds = 5;
  EXPECT_FALSE(Connect(*server, no_cert)->GetServerInfo().ok());
  client::ClientOptions plain;
  plain.max_attempts = 1;
  plain.call_deadline_seconds = 5;
  EXPECT_FALSE(Connect(*server, plain)->GetServerInfo().ok());
}

TEST(TlsTest, ServerOnlyTls) {
  const std::string dir = MakeTempDir();
  if (!MakeCertificates(dir)) GTEST_SKIP() << "openssl CLI not available to make test certificates";
  server::ServerOptions o = TestServerOptions();
  o.security.tls_cert_file = dir + "/server.pem";
  o.security.tls_key_file = dir + "/server.key";
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  client::ClientOptions c;
  c.tls = true;
  c.tls_root_certs = ReadBytes(dir + "/ca.pem");
  c.tls_server_name = "spexd.test";
  c.max_attempts = 1;
  EXPECT_TRUE(Connect(*server, c)->GetServerInfo().ok());
  // A client that trusts another CA refuses the server.
  client::ClientOptions wrong_ca = c;
  wrong_ca.tls_root_certs = ReadBytes(dir + "/client.pem");
  wrong_ca.call_deadline_seconds = 5;
  EXPECT_FALSE(Connect(*server, wrong_ca)->GetServerInfo().ok());
  // Bad TLS configuration fails at start with a clear error.
  server::ServerOptions half = TestServerOptions();
  half.security.tls_cert_file = dir + "/server.pem";
  EXPECT_FALSE(server::SpexdServer::Start(half).ok());
}

}  // namespace
}  // namespace spexd::testing
