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

// Whether `target` is this host: a loopback address (127.0.0.0/8, ::1), localhost, or a
// Unix socket, with or without a dns:, ipv4: or ipv6: scheme. Channels to such a target
// take no proxy from http_proxy, https_proxy or grpc_proxy: a proxy cannot reach this
// host's loopback, where spexd listens by default, and clusters often set those variables.
bool IsLocalTarget(const std::string& target);

// Receivers of a streamed extraction. A callback returning an error cancels the call
// (the server stops at its next bundle boundary) and Extract returns that error.
struct ExtractCallbacks {
  std::function<absl::Status(const v1::FrameHeader&)> on_header;
  // Each BundleData part, in order (several parts per bundle for large bundles).
  std::function<absl::Status(v1::BundleData&&)> on_bundle;
  std::function<absl::Status(const v1::ModelChunk&)> on_model;
  // ARRAY_FLOAT32 streams: the specmask and scores parts, after the last bundle.
  std::function<absl::Status(const v1::FrameProducts&)> on_products;
  std::function<void(const v1::ExtractSummary&)> on_summary;
};

// A CUDA region registered with the server (docs/handoff.md). The region lives
// while this object holds its RegisterCudaRegion call open; destroying it without
// Release cancels the call, which releases the region too (without waiting for
// extractions that use it: call Release before freeing the memory). It must not outlive
// the SpexdClient that made it.
class CudaRegionLease {
 public:
  ~CudaRegionLease();
  CudaRegionLease(const CudaRegionLease&) = delete;
  CudaRegionLease& operator=(const CudaRegionLease&) = delete;
  const std::string& id() const { return info_.region_id(); }
  const v1::RegisterCudaRegionResponse& info() const { return info_; }
  // UnregisterCudaRegion: returns once the server has unmapped the region (after any
  // extraction using it ended), so that the producer may cudaFree it. Idempotent.
  absl::Status Release();

 private:
  friend class SpexdClient;
  struct Call;
  CudaRegionLease(class SpexdClient* client, std::unique_ptr<Call> call, v1::RegisterCudaRegionResponse info);
  class SpexdClient* client_;
  std::unique_ptr<Call> call_;
  v1::RegisterCudaRegionResponse info_;
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

  // Registers a device allocation by its CUDA IPC handle (the server must run on this
  // node; a local connection or an authenticated one). No retries: errors as the proto.
  absl::StatusOr<std::unique_ptr<CudaRegionLease>> RegisterCudaRegion(
      const v1::RegisterCudaRegionRequest& request);
  absl::Status UnregisterCudaRegion(const std::string& region_id);

  // Runs ExtractFrame (or ExtractBundles when `subset`). With `upload` non-null the
  // image bytes are streamed in chunks (header.upload_size is set here); else
  // header.server_path or header.cuda_image must be set. Retries on UNAVAILABLE and a full queue only while
  // no callback has been given a message, so callbacks never see a message twice. OK
  // only after the summary.
  absl::Status Extract(v1::ExtractHeader header, const std::string* upload, bool subset,
                       const ExtractCallbacks& callbacks);

  // Runs ExtractExposure (an exposure as one job, docs/service.md "Exposures"): every
  // frame of `request` under one deadline, options().extract_deadline_seconds (0: none).
  // `on_frame` receives each frame's result as the server reports it (completion order;
  // check each one's code); an error from it cancels the call (every frame not finished
  // stops) and is returned. Retries UNAVAILABLE and a full queue only while nothing has
  // been received. Returns the summary once every frame has its result.
  absl::StatusOr<v1::ExposureSummary> ExtractExposure(
      const v1::ExposureRequest& request,
      const std::function<absl::Status(const v1::ExposureFrameResult&)>& on_frame);

  // Server-written frames: the server writes header.server_output_path (and
  // header.server_model_path, when set) atomically into its output roots and streams no
  // arrays (results_to_file_only is set here). Returns the summary, which names the
  // files with their sizes and SHA-256 (CRC-32 with header.output_checksum =
  // FILE_CHECKSUM_CRC32). Errors as Extract; an output outside the server's
  // output roots is PERMISSION_DENIED. Without header.overwrite, a file already at a
  // name is kept when it is the frame this request writes (checksum dates aside: a
  // retry gets the first reply's path, size and SHA-256), else ALREADY_EXISTS. Retries
  // UNAVAILABLE until the summary arrives (header and progress are no callback's), so a
  // server lost mid-frame or after writing is asked again.
  absl::StatusOr<v1::ExtractSummary> ExtractToServerFile(v1::ExtractHeader header,
                                                         const std::string* upload, bool subset);

  const ClientOptions& options() const { return options_; }

 private:
  struct Stubs;
  SpexdClient(const ClientOptions& options, std::unique_ptr<Stubs> stubs);
  ClientOptions options_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_SPEXD_CLIENT_H_
