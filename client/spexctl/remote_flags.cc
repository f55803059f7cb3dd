#include "client/spexctl/remote_flags.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace spexd::client {
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::vector<FlagSpec>& ConnectionFlagSpecs() {
  static const std::vector<FlagSpec> specs = {
      {"server", 0, true, "server address host:port or dns:///host:port"},
      {"deadline", 0, true, "deadline in seconds (extract: whole run; others: 60)"},
      {"retries", 0, true,
       "attempts on UNAVAILABLE, with exponential backoff (default 4; 1: no retries)"},
      {"queue-wait", 0, true,
       "seconds to keep retrying while the server's queue is full (default 600, within "
       "--deadline)"},
      {"tls", 0, false, "use TLS (system roots unless --tls-ca)"},
      {"tls-ca", 0, true, "PEM file of the CA that signed the server certificate"},
      {"tls-cert", 0, true, "PEM client certificate (mutual TLS)"},
      {"tls-key", 0, true, "PEM client private key (mutual TLS)"},
      {"tls-server-name", 0, true, "name to verify in the server certificate"},
      {"auth-token-file", 0, true, "file with the bearer token the server requires"},
      {"token-file", 0, true, "", "auth-token-file"},
  };
  return specs;
}

const std::vector<FlagSpec>& RemoteExtractFlagSpecs() {
  static const std::vector<FlagSpec> specs = {
      {"server-path", 0, false,
       "input and PSF paths are on the server (inside its data roots): no upload"},
      {"server-output-path", 0, true,
       "have the server write the frame to this server path (inside its output roots); "
       "without -o nothing is streamed back and -m is a server path too"},
      {"server-output", 0, true, "", "server-output-path"},
      {"server-overwrite", 0, false, "let --server-output (and -m) replace an existing file"},
      {"server-checksum", 0, true,
       "sha256|crc32: the checksum of each file the server writes, as printed (default "
       "sha256; crc32, as gzip and zlib.crc32 compute it, costs the server ~8x less)"},
      {"wire-precision", 0, true,
       "float32|float64: arrays streamed for -o (default float32, the file's precision, "
       "same file; float64 with --snr)"},
      {"priority", 0, true, "realtime|reprocessing (default reprocessing)"},
      {"bundles", 0, true, "comma-separated bundle indices (ExtractBundles)"},
      {"fibers", 0, true, "comma-separated fibres whose bundles to extract (ExtractBundles)"},
      {"snr", 0, false, "print the median S/N of every fibre"},
  };
  return specs;
}

std::vector<FlagSpec> JoinFlagSpecs(std::initializer_list<const std::vector<FlagSpec>*> lists) {
  std::vector<FlagSpec> out;
  for (const auto* list : lists) {
    for (const FlagSpec& s : *list) {
      bool dup = false;
      for (const FlagSpec& o : out) dup = dup || o.long_name == s.long_name;
      if (!dup) out.push_back(s);
    }
  }
  return out;
}

absl::StatusOr<ClientOptions> ClientOptionsFromArgs(const ParsedArgs& args) {
  ClientOptions o;
  o.target = args.GetOr("server", "");
  if (o.target.empty()) return absl::InvalidArgumentError("missing --server host:port");
  SPEXD_ASSIGN_OR_RETURN(double deadline, args.GetDouble("deadline", 0.0));
  if (deadline < 0) return absl::InvalidArgumentError("--deadline must be >= 0");
  if (deadline > 0) {
    o.call_deadline_seconds = deadline;
    o.extract_deadline_seconds = deadline;
  }
  SPEXD_ASSIGN_OR_RETURN(o.max_attempts, args.GetInt("retries", 4));
  if (o.max_attempts < 1) return absl::InvalidArgumentError("--retries must be >= 1");
  SPEXD_ASSIGN_OR_RETURN(o.queue_full_wait_seconds, args.GetDouble("queue-wait", 600.0));
  if (o.queue_full_wait_seconds < 0) return absl::InvalidArgumentError("--queue-wait must be >= 0");
  o.tls = args.Has("tls") || args.Has("tls-ca") || args.Has("tls-cert");
  if (auto ca = args.Get("tls-ca")) {
    SPEXD_ASSIGN_OR_RETURN(o.tls_root_certs, ReadWholeFile(*ca, "--tls-ca"));
  }
  if (args.Has("tls-cert") != args.Has("tls-key")) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (auto cert = args.Get("tls-cert")) {
    SPEXD_ASSIGN_OR_RETURN(o.tls_client_cert, ReadWholeFile(*cert, "--tls-cert"));
    SPEXD_ASSIGN_OR_RETURN(o.tls_client_key, ReadWholeFile(*args.Get("tls-key"), "--tls-key"));
  }
  o.tls_server_name = args.GetOr("tls-server-name", "");
  if (auto token_file = args.Get("auth-token-file")) {
    SPEXD_ASSIGN_OR_RETURN(std::string token, ReadWholeFile(*token_file, "--auth-token-file"));
    o.bearer_token = std::string(absl::StripAsciiWhitespace(token));
  }
  return o;
}

}  // namespace spexd::client
