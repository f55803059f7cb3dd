// C++ client of the spexd service (spexd.v1). Every call has a deadline, retries with
// exponential backoff on UNAVAILABLE and on a full queue (RESOURCE_EXHAUSTED that the
// server marks transient), and carries the bearer token when one is set.
// `dns:///host:port` targets are balanced round-robin across the resolved replicas.
// Depends only on spexd_proto and Abseil; gRPC types stay out of this header.
#ifndef SPEXD_CLIENT_SPEXD_CLIENT_H_
#define SPEXD_CLIENT_SPEXD_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::client {

struct ClientOptions {
  std::string target;  // host:port, or dns:///host:port for several replicas
  double call_deadline_seconds = 60;     // admin calls (LoadPsf uploads included)
  double extract_deadline_seconds = 0;   // whole extraction; 0 = none
  int max_attempts = 4;                  // tries per call on UNAVAILABLE; 1: no retries
  // A full queue (RESOURCE_EXHAUSTED marked "spexd-retryable" by the server) is retried
  // for this long at most, and never past the call's deadline.
  double queue_full_wait_seconds = 600;
  double initial_backoff_seconds = 0.2;  // doubled per retry, with jitter
  double max_backoff_seconds = 5;
  std::size_t upload_chunk_bytes = 1 << 20;  // well under the 4 MiB message limit
  // TLS (PEM contents, not paths). With root certs empty, the system roots are used.
  bool tls = false;
  std::string tls_root_certs;
  std::string tls_client_cert, tls_client_key;  // mutual TLS
  std::string tls_server_name;                  // overrides the name checked in the cert
  std::string bearer_token;                     // sent as authorization: Bearer <token>
};

// Receivers of a streamed extraction. A callback returning an error cancels the call
// (the server stops at its next bundle boundary) and Extract returns that error.
struct ExtractCallbacks {
  std::function<absl::Status(const v1::FrameHeader&)> on_header;
  // Each BundleData part, in order (several parts per bundle for large bundles).
  std::function<absl::Status(v1::BundleData&&)> on_bundle;
  std::function<absl::Status(const v1::ModelChunk&)> on_model;
  std::function<void(const v1::ExtractSummary&)> on_summary;
};

class SpexdClient {
 public:
  static absl::StatusOr<std::unique_ptr<SpexdClient>> Create(const ClientOptions& options);
  ~SpexdClient();
  SpexdClient(const SpexdClient&) = delete;
  SpexdClient& operator=(const SpexdClient&) = delete;

  // PSF lifecycle. The returned id is the content hash; loading is idempotent.
  absl::StatusOr<v1::PsfInfo> LoadPsfFromServerPath(const std::string& path);
  absl::StatusOr<v1::PsfInfo> LoadPsfFromBytes(const std::string& bytes, const std::string& name);
  absl::StatusOr<v1::ListPsfsResponse> ListPsfs();
  absl::StatusOr<v1::UnloadPsfResponse> UnloadPsf(const std::string& id);
  absl::StatusOr<v1::ServerInfo> GetServerInfo();
  // grpc.health.v1 Check: "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN".
  absl::StatusOr<std::string> CheckHealth(const std::string& service = "");

  // Runs ExtractFrame (or ExtractBundles when `subset`). With `upload` non-null the
  // image bytes are streamed in chunks (header.upload_size is set here); else
  // header.server_path must be set. Retries on UNAVAILABLE and a full queue only while
  // nothing has been received, so callbacks never see a message twice. OK only after
  // the summary.
  absl::Status Extract(v1::ExtractHeader header, const std::string* upload, bool subset,
                       const ExtractCallbacks& callbacks);

  const ClientOptions& options() const { return options_; }

 private:
  struct Stubs;
  SpexdClient(const ClientOptions& options, std::unique_ptr<Stubs> stubs);
  ClientOptions options_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_SPEXD_CLIENT_H_
