// spexctl's flags for talking to a server (all remote subcommands), and their mapping
// to ClientOptions. Kept apart from extract_flags so that local-only builds need no
// gRPC.
#ifndef SPEXD_CLIENT_REMOTE_FLAGS_H_
#define SPEXD_CLIENT_REMOTE_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/spexctl/cli_args.h"
#include "client/lib/spexd_client.h"

namespace spexd::client {

// Connection flags (--server, TLS, token, deadline, retries).
const std::vector<FlagSpec>& ConnectionFlagSpecs();
// Extra flags of `spexctl extract` in remote mode (--server-path, --priority, ...).
const std::vector<FlagSpec>& RemoteExtractFlagSpecs();

// Reads --server, --tls*, --token-file, --deadline, --retries. TLS files are read here.
absl::StatusOr<ClientOptions> ClientOptionsFromArgs(const ParsedArgs& args);

// The whole content of a local file; NOT_FOUND naming `what` and the path when unreadable.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what);

// Concatenation helper for ParseArgs.
std::vector<FlagSpec> JoinFlagSpecs(std::initializer_list<const std::vector<FlagSpec>*> lists);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_REMOTE_FLAGS_H_
