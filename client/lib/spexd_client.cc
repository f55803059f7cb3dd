#include "client/lib/spexd_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <thread>
#include <utility>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "spexd/v1/spexd.grpc.pb.h"

namespace spexd::client {
namespace {

// The reverse of the server's status_util: gRPC's answer as an absl::Status for callers.
absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Trailing metadata the server sets on a transient RESOURCE_EXHAUSTED (queue full).
constexpr char kRetryableMetadataKey[] = "spexd-retryable";

// Replies are at most 4 MiB by contract; allow slack for a server with a larger
// --max_message_bytes.
constexpr int kMaxReceiveBytes = 64 << 20;

}  // namespace

struct SpexdClient::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Extraction::Stub> extraction;
  std::unique_ptr<v1::Admin::Stub> admin;
  std::unique_ptr<v1::CudaRegions::Stub> regions;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
  std::mt19937_64 rng{std::random_device{}()};
};

SpexdClient::SpexdClient(const ClientOptions& options, std::unique_ptr<Stubs> stubs)
    : options_(options), stubs_(std::move(stubs)) {}

SpexdClient::~SpexdClient() = default;

bool IsLocalTarget(const std::string& target) {
  absl::string_view t = target;
  if (absl::StartsWith(t, "unix:") || absl::StartsWith(t, "unix-abstract:")) return true;
  if (absl::ConsumePrefix(&t, "dns:")) {
    // dns:host:port, dns:///host:port, or dns://AUTHORITY/host:port
    if (absl::ConsumePrefix(&t, "//")) {
      const std::size_t slash = t.find('/');
      if (slash == absl::string_view::npos) return false;
      t.remove_prefix(slash + 1);
    }
  } else if (!absl::ConsumePrefix(&t, "ipv4:")) {
    absl::ConsumePrefix(&t, "ipv6:");
  }
  if (t.empty()) return false;
  // Every address of a list (ipv4:a:p,b:p) must be local.
  for (absl::string_view address : absl::StrSplit(t, ',')) {
    absl::string_view host = address;
    if (absl::ConsumePrefix(&host, "[")) {
      host = host.substr(0, host.find(']'));
    } else if (std::count(host.begin(), host.end(), ':') == 1) {
      host = host.substr(0, host.find(':'));  // host:port
    }
    if (absl::EqualsIgnoreCase(host, "localhost")) continue;
    const std::string h(host);
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
      if ((ntohl(v4.s_addr) >> 24) == 127) continue;
      return false;
    }
    if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
      if (IN6_IS_ADDR_LOOPBACK(&v6)) continue;
      if (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127) continue;
      return false;
    }
    return false;  // another name: the resolver and any proxy decide where it leads
  }
  return true;
}

absl::StatusOr<std::unique_ptr<SpexdClient>> SpexdClient::Create(const ClientOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("no server address");
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs;
    ssl.pem_cert_chain = options.tls_client_cert;
    ssl.pem_private_key = options.tls_client_key;
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  // With dns:/// every resolved address gets a subchannel and calls rotate over them.
  args.SetLoadBalancingPolicyName("round_robin");
  args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  if (IsLocalTarget(options.target)) args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  auto stubs = std::make_unique<Stubs>();
  stubs->channel = grpc::CreateCustomChannel(options.target, creds, args);
  stubs->extraction = v1::Extraction::NewStub(stubs->channel);
  stubs->admin = v1::Admin::NewStub(stubs->channel);
  stubs->regions = v1::CudaRegions::NewStub(stubs->channel);
  stubs->health = grpc::health::v1::Health::NewStub(stubs->channel);
  return std::unique_ptr<SpexdClient>(new SpexdClient(options, std::move(stubs)));
}

namespace {

void Prepare(grpc::ClientContext* ctx, const ClientOptions& o, double deadline_seconds) {
  if (deadline_seconds > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(
                          std::chrono::duration<double>(deadline_seconds)));
  }
  if (!o.bearer_token.empty()) ctx->AddMetadata("authorization", "Bearer " + o.bearer_token);
}

// What one attempt tells the retry loop besides its status.
struct Attempt {
  bool retryable = true;    // false once the caller has seen data
  bool queue_full = false;  // RESOURCE_EXHAUSTED that the server marked transient
};

// The server marks a full queue or full upload slots (transient) with trailing
// metadata; a request over a hard limit (it would never fit) is not marked.
bool QueueFull(grpc::ClientContext& ctx, const grpc::Status& s) {
  if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return false;
  const auto& trailers = ctx.GetServerTrailingMetadata();
  return trailers.find(kRetryableMetadataKey) != trailers.end();
}

// Runs `attempt` until it succeeds or fails for good, sleeping a jittered, doubling
// backoff between tries: UNAVAILABLE up to max_attempts times; a full queue as long as
// queue_full_wait_seconds and the call's deadline (`deadline_seconds`, 0: none) allow,
// since a burst of requests (a DESI exposure is 30 frames at once) drains in minutes.
// max_attempts = 1 disables both.
template <typename Fn>
absl::Status WithRetries(const ClientOptions& o, std::mt19937_64& rng, double deadline_seconds,
                         Fn attempt) {
  const auto start = std::chrono::steady_clock::now();
  double wait_limit = o.queue_full_wait_seconds;
  if (deadline_seconds > 0) wait_limit = std::min(wait_limit, deadline_seconds);
  double backoff = o.initial_backoff_seconds;
  int unavailable = 0;
  for (;;) {
    Attempt info;
    absl::Status status = attempt(&info);
    if (status.ok() || !info.retryable || o.max_attempts <= 1) return status;
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    const double sleep = backoff * jitter(rng);
    if (absl::IsUnavailable(status)) {
      if (++unavailable >= o.max_attempts) return status;
    } else if (info.queue_full) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (elapsed + sleep > wait_limit) return status;
    } else {
      return status;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
    backoff = std::min(backoff * 2, o.max_backoff_seconds);
  }
}

// One unary admin call with the call deadline, retried on UNAVAILABLE.
template <typename Resp, typename Call>
absl::StatusOr<Resp> UnaryWithRetries(const ClientOptions& o, std::mt19937_64& rng, Call call) {
  Resp resp;
  absl::Status s = WithRetries(o, rng, o.call_deadline_seconds, [&](Attempt* a) {
    grpc::ClientContext ctx;
    Prepare(&ctx, o, o.call_deadline_seconds);
    const grpc::Status status = call(&ctx, &resp);
    a->queue_full = QueueFull(ctx, status);
    return FromGrpc(status);
  });
  if (!s.ok()) return s;
  return resp;
}

}  // namespace

namespace {

// One LoadPsf call (a client stream) with the call deadline, retried as WithRetries does:
// `write` sends the request messages (false once the server ended the call).
absl::StatusOr<v1::PsfInfo> LoadPsfCall(
    v1::Admin::Stub& admin, const ClientOptions& o, std::mt19937_64& rng,
    const std::function<bool(grpc::ClientWriter<v1::LoadPsfRequest>&)>& write) {
  v1::PsfInfo info;
  absl::Status s = WithRetries(o, rng, o.call_deadline_seconds, [&](Attempt* a) {
    grpc::ClientContext ctx;
    Prepare(&ctx, o, o.call_deadline_seconds);
    auto writer = admin.LoadPsf(&ctx, &info);
    write(*writer);
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    a->queue_full = QueueFull(ctx, status);
    return FromGrpc(status);
  });
  if (!s.ok()) return s;
  return info;
}

}  // namespace

absl::StatusOr<v1::PsfInfo> SpexdClient::LoadPsfFromServerPath(const std::string& path) {
  v1::LoadPsfRequest req;
  req.set_server_path(path);
  return LoadPsfCall(*stubs_->admin, options_, stubs_->rng,
                     [&](grpc::ClientWriter<v1::LoadPsfRequest>& w) { return w.Write(req); });
}

absl::StatusOr<v1::PsfInfo> SpexdClient::LoadPsfFromBytes(const std::string& bytes,
                                                          const std::string& name) {
  v1::LoadPsfRequest req;
  req.mutable_upload()->set_name(name);
  req.mutable_upload()->set_size(static_cast<int64_t>(bytes.size()));
  return LoadPsfCall(*stubs_->admin, options_, stubs_->rng,
                     [&](grpc::ClientWriter<v1::LoadPsfRequest>& w) {
    bool ok = w.Write(req);
    for (std::size_t off = 0; ok && off < bytes.size(); off += options_.upload_chunk_bytes) {
      v1::LoadPsfRequest chunk;
      chunk.set_chunk(bytes.substr(off, options_.upload_chunk_bytes));
      ok = w.Write(chunk);
    }
    return ok;
  });
}

absl::StatusOr<v1::ListPsfsResponse> SpexdClient::ListPsfs() {
  return UnaryWithRetries<v1::ListPsfsResponse>(
      options_, stubs_->rng, [&](grpc::ClientContext* ctx, v1::ListPsfsResponse* resp) {
        return stubs_->admin->ListPsfs(ctx, v1::ListPsfsRequest(), resp);
      });
}

absl::StatusOr<v1::UnloadPsfResponse> SpexdClient::UnloadPsf(const std::string& id) {
  v1::UnloadPsfRequest req;
  req.set_id(id);
  return UnaryWithRetries<v1::UnloadPsfResponse>(
      options_, stubs_->rng, [&](grpc::ClientContext* ctx, v1::UnloadPsfResponse* resp) {
        return stubs_->admin->UnloadPsf(ctx, req, resp);
      });
}

absl::StatusOr<v1::ServerInfo> SpexdClient::GetServerInfo() {
  return UnaryWithRetries<v1::ServerInfo>(
      options_, stubs_->rng, [&](grpc::ClientContext* ctx, v1::ServerInfo* resp) {
        return stubs_->admin->GetServerInfo(ctx, v1::GetServerInfoRequest(), resp);
      });
}

absl::StatusOr<std::string> SpexdClient::CheckHealth(const std::string& service) {
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  absl::Status s = WithRetries(options_, stubs_->rng, options_.call_deadline_seconds,
                               [&](Attempt*) {
    grpc::ClientContext ctx;
    Prepare(&ctx, options_, options_.call_deadline_seconds);
    return FromGrpc(stubs_->health->Check(&ctx, req, &resp));
  });
  if (!s.ok()) return s;
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
}

absl::Status SpexdClient::Extract(v1::ExtractHeader header, const std::string* upload, bool subset,
                                  const ExtractCallbacks& cb) {
  if (upload != nullptr) {
    header.set_upload_size(static_cast<int64_t>(upload->size()));
  } else if (!header.has_server_path() && !header.has_cuda_image()) {
    return absl::InvalidArgumentError("Extract needs an upload, header.server_path or header.cuda_image");
  }
  return WithRetries(options_, stubs_->rng, options_.extract_deadline_seconds,
                     [&](Attempt* attempt) -> absl::Status {
    grpc::ClientContext ctx;
    Prepare(&ctx, options_, options_.extract_deadline_seconds);
    auto stream = subset ? stubs_->extraction->ExtractBundles(&ctx)
                         : stubs_->extraction->ExtractFrame(&ctx);
    v1::ExtractRequest req;
    *req.mutable_header() = header;
    // A failed write means the server already ended the call: Finish says why.
    bool ok = stream->Write(req);
    if (upload != nullptr) {
      for (std::size_t off = 0; ok && off < upload->size(); off += options_.upload_chunk_bytes) {
        v1::ExtractRequest chunk;
        chunk.mutable_chunk()->set_data(upload->data() + off,
                                        std::min(options_.upload_chunk_bytes, upload->size() - off));
        ok = stream->Write(chunk);
      }
    }
    if (ok) stream->WritesDone();
    v1::ExtractResponse resp;
    absl::Status callback_status;
    bool summary = false;
    // Once a callback has seen data, a retry would repeat it; messages no callback takes
    // (ExtractToServerFile's header and progress) leave the call retryable, so that a
    // server lost mid-frame is asked again (a file it wrote is then kept: docs/service.md).
    auto seen = [&](bool taken) {
      if (taken) attempt->retryable = false;
      return taken;
    };
    while (callback_status.ok() && stream->Read(&resp)) {
      switch (resp.kind_case()) {
        case v1::ExtractResponse::kHeader:
          if (seen(bool(cb.on_header))) callback_status = cb.on_header(resp.header());
          break;
        case v1::ExtractResponse::kBundle:
          if (seen(bool(cb.on_bundle))) {
            callback_status = cb.on_bundle(std::move(*resp.mutable_bundle()));
          }
          break;
        case v1::ExtractResponse::kModel:
          if (seen(bool(cb.on_model))) callback_status = cb.on_model(resp.model());
          break;
        case v1::ExtractResponse::kProducts:
          if (seen(bool(cb.on_products))) callback_status = cb.on_products(resp.products());
          break;
        case v1::ExtractResponse::kSummary:
          summary = true;
          if (seen(bool(cb.on_summary))) cb.on_summary(resp.summary());
          break;
        default:
          break;  // a newer server's message kind: ignore
      }
    }
    if (!callback_status.ok()) {
      ctx.TryCancel();
      stream->Finish();
      return callback_status;
    }
    const grpc::Status finished = stream->Finish();
    attempt->queue_full = QueueFull(ctx, finished);
    absl::Status status = FromGrpc(finished);
    if (status.ok() && !summary) {
      return absl::DataLossError("the server ended the stream without a summary");
    }
    return status;
  });
}

absl::StatusOr<v1::ExposureSummary> SpexdClient::ExtractExposure(
    const v1::ExposureRequest& request,
    const std::function<absl::Status(const v1::ExposureFrameResult&)>& on_frame) {
  v1::ExposureSummary summary;
  absl::Status st = WithRetries(options_, stubs_->rng, options_.extract_deadline_seconds,
                                [&](Attempt* attempt) -> absl::Status {
    grpc::ClientContext ctx;
    Prepare(&ctx, options_, options_.extract_deadline_seconds);
    auto reader = stubs_->extraction->ExtractExposure(&ctx, request);
    v1::ExposureResponse resp;
    absl::Status callback_status;
    bool got_summary = false;
    while (callback_status.ok() && reader->Read(&resp)) {
      attempt->retryable = false;  // the caller has seen results: a retry would repeat them
      if (resp.has_frame()) {
        if (on_frame) callback_status = on_frame(resp.frame());
      } else if (resp.has_summary()) {
        got_summary = true;
        summary = resp.summary();
      }
    }
    if (!callback_status.ok()) {
      ctx.TryCancel();
      reader->Finish();
      return callback_status;
    }
    const grpc::Status finished = reader->Finish();
    attempt->queue_full = QueueFull(ctx, finished);
    absl::Status status = FromGrpc(finished);
    if (status.ok() && !got_summary) {
      return absl::DataLossError("the server ended the exposure without a summary");
    }
    return status;
  });
  if (!st.ok()) return st;
  return summary;
}

absl::StatusOr<v1::ExtractSummary> SpexdClient::ExtractToServerFile(v1::ExtractHeader header,
                                                                   const std::string* upload,
                                                                   bool subset) {
  if (header.server_output_path().empty()) {
    return absl::InvalidArgumentError("ExtractToServerFile needs header.server_output_path");
  }
  header.set_results_to_file_only(true);
  v1::ExtractSummary summary;
  ExtractCallbacks cb;
  cb.on_summary = [&](const v1::ExtractSummary& s) { summary = s; };
  absl::Status status = Extract(std::move(header), upload, subset, cb);
  if (!status.ok()) return status;
  return summary;
}

// ---------------------------------------------------------------- CUDA regions

// The open RegisterCudaRegion call that holds the region.
struct CudaRegionLease::Call {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::RegisterCudaRegionResponse>> reader;
  bool finished = false;
  void End() {
    if (finished) return;
    finished = true;
    ctx.TryCancel();
    (void)reader->Finish();
  }
};

CudaRegionLease::CudaRegionLease(SpexdClient* client, std::unique_ptr<Call> call,
                                 v1::RegisterCudaRegionResponse info)
    : client_(client), call_(std::move(call)), info_(std::move(info)) {}

CudaRegionLease::~CudaRegionLease() { call_->End(); }

absl::Status CudaRegionLease::Release() {
  if (call_->finished) return absl::OkStatus();
  absl::Status status = client_->UnregisterCudaRegion(info_.region_id());
  // The server ends the holding call with OK once the region is unregistered.
  v1::RegisterCudaRegionResponse ignored;
  if (status.ok()) {
    while (call_->reader->Read(&ignored)) {
    }
    call_->finished = true;
    (void)call_->reader->Finish();
  } else {
    call_->End();
  }
  return status;
}

absl::StatusOr<std::unique_ptr<CudaRegionLease>> SpexdClient::RegisterCudaRegion(
    const v1::RegisterCudaRegionRequest& request) {
  auto call = std::make_unique<CudaRegionLease::Call>();
  // No deadline: the call lives as long as the region.
  Prepare(&call->ctx, options_, 0);
  call->reader = stubs_->regions->RegisterCudaRegion(&call->ctx, request);
  v1::RegisterCudaRegionResponse info;
  if (!call->reader->Read(&info)) {
    call->finished = true;
    return FromGrpc(call->reader->Finish());
  }
  return std::unique_ptr<CudaRegionLease>(new CudaRegionLease(this, std::move(call), std::move(info)));
}

absl::Status SpexdClient::UnregisterCudaRegion(const std::string& region_id) {
  v1::UnregisterCudaRegionRequest req;
  req.set_region_id(region_id);
  v1::UnregisterCudaRegionResponse resp;
  grpc::ClientContext ctx;
  Prepare(&ctx, options_, options_.call_deadline_seconds);
  return FromGrpc(stubs_->regions->UnregisterCudaRegion(&ctx, req, &resp));
}

}  // namespace spexd::client
