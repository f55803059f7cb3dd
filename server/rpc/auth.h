// Bearer-token check for every spexd RPC (--auth_token_file). The token travels in the
// `authorization: Bearer <token>` metadata; TLS (--tls_cert) keeps it private on the wire.
#ifndef SPEXD_SERVER_AUTH_H_
#define SPEXD_SERVER_AUTH_H_

#include <string>

#include <grpcpp/server_context.h>

#include "absl/status/status.h"

namespace spexd::server {

// OK when `expected` is empty (no token configured) or the call carries it;
// UNAUTHENTICATED otherwise. The comparison takes the same time for any wrong token of
// the same length.
absl::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& expected);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_AUTH_H_
