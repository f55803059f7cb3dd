#include "server/rpc/cuda_regions_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/backend/device_region.h"
#include "core/base/error_text.h"
#include "core/base/status_macros.h"
#include "server/rpc/auth.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/state/region_registry.h"
#include "server/state/scheduler.h"
#include "server/platform/status_util.h"

namespace spexd::server {
namespace {

constexpr std::size_t kMaxRegionNameChars = 256;
// Unregister waits at most this long for extractions that still use the region.
constexpr absl::Duration kMaxUnregisterWait = absl::Seconds(60);

void CountRequest(ServiceContext* context, const char* rpc, const grpc::Status& status) {
  if (context->env.metrics != nullptr) {
    context->env.metrics->CountRequest(rpc, GrpcCodeName(status.error_code()));
  }
}

absl::Status CheckRegisterRequest(const v1::RegisterCudaRegionRequest& r) {
  if (r.name().empty() || r.name().size() > kMaxRegionNameChars) {
    return absl::InvalidArgumentError(
        absl::StrCat("region name must have 1 to ", kMaxRegionNameChars, " characters"));
  }
  if (r.ipc_handle().size() != core::kCudaIpcHandleBytes) {
    return absl::InvalidArgumentError(absl::StrCat("ipc_handle must have ", core::kCudaIpcHandleBytes,
                                                   " bytes (cudaIpcMemHandle_t), not ",
                                                   r.ipc_handle().size()));
  }
  if (r.device() < 0) return absl::InvalidArgumentError(absl::StrCat("device ", r.device(), " < 0"));
  if (r.size() <= 0) return absl::InvalidArgumentError(absl::StrCat("size ", r.size(), " <= 0"));
  return absl::OkStatus();
}

// One RegisterCudaRegion call: registers the region, sends its id, then holds it until
// the registry ends the call (Unregister, drain) or the client goes away (OnCancel).
// Finish is called exactly once: by End, deferred to OnWriteDone while the one write is
// in flight.
class RegionHoldReactor final : public grpc::ServerWriteReactor<v1::RegisterCudaRegionResponse> {
 public:
  RegionHoldReactor(ServiceContext* context, grpc::CallbackServerContext* call,
                    const v1::RegisterCudaRegionRequest& request)
      : context_(context), peer_(call->peer()) {
    absl::Status status = Register(*call, request);
    if (!status.ok()) End(status);
  }

  void OnWriteDone(bool /*ok*/) override {
    std::optional<absl::Status> end;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      end.swap(pending_end_);
    }
    if (end.has_value()) FinishNow(*end);
  }

  void OnCancel() override {
    // The client cancelled or its connection closed: the region goes with it.
    if (!id_.empty() && context_->regions->Detach(id_)) {
      Log(LogLevel::kInfo, "cuda_region_released", {{"region", name_}, {"why", "call ended"}});
      End(absl::CancelledError("RegisterCudaRegion call ended; region released"));
    }
  }

  void OnDone() override { delete this; }

  // Ends the call once; safe from any thread.
  void End(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (ended_) return;
      ended_ = true;
      if (writing_) {
        pending_end_ = status;
        return;
      }
    }
    FinishNow(status);
  }

 private:
  absl::Status Register(const grpc::CallbackServerContext& call,
                        const v1::RegisterCudaRegionRequest& request) {
    SPEXD_RETURN_IF_ERROR(CheckBearerToken(call, context_->auth_token));
    if (!context_->serving.load()) {
      return absl::UnavailableError(context_->draining.load() ? "server is draining"
                                                              : "server is warming up");
    }
    SPEXD_RETURN_IF_ERROR(CheckRegionPeer(call, *context_));
    SPEXD_RETURN_IF_ERROR(CheckRegisterRequest(request));
    // Opening a handle takes a few milliseconds on this reaction thread: rare, and no
    // extraction is waited for (GpuCapabilities::ImportRegion).
    auto memory = context_->scheduler->ImportRegion(request.ipc_handle(), request.device(),
                                                    static_cast<uint64_t>(request.size()));
    if (!memory.ok()) return memory.status();
    name_ = request.name();
    {
      absl::MutexLock lock(&mu_);
      writing_ = true;  // an End from the registry now waits for the write
    }
    std::shared_ptr<const RegisteredRegion> region = context_->regions->Add(
        *std::move(memory), name_, peer_, [this](const absl::Status& s) { End(s); });
    id_ = region->id;
    response_.set_region_id(region->id);
    response_.set_name(region->name);
    response_.set_device(region->device());
    response_.set_size(static_cast<int64_t>(region->size()));
    Log(LogLevel::kInfo, "cuda_region_registered",
        {{"region", name_}, {"peer", peer_}, {"device", region->device()},
         {"bytes", static_cast<int64_t>(region->size())}});
    StartWrite(&response_);
    return absl::OkStatus();
  }

  void FinishNow(const absl::Status& status) {
    const grpc::Status out = ToGrpcStatus(status);
    CountRequest(context_, "RegisterCudaRegion", out);
    if (!status.ok() && id_.empty()) {
      Log(LogLevel::kWarning, "cuda_region_refused",
          {{"peer", peer_}, {"code", GrpcCodeName(out.error_code())}, {"error", std::string(status.message())}});
    }
    Finish(out);
  }

  ServiceContext* const context_;
  const std::string peer_;
  std::string id_, name_;
  v1::RegisterCudaRegionResponse response_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> pending_end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status CheckRegionPeer(const grpc::ServerContextBase& call, const ServiceContext& context) {
  if (IsLocalPeer(call.peer())) return absl::OkStatus();
  if (!context.auth_token.empty()) return absl::OkStatus();  // the token was checked
  const std::shared_ptr<const grpc::AuthContext> auth = call.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "CUDA regions are accepted only over a local connection (unix socket or loopback) or "
      "from an authenticated client (bearer token or mutual TLS); peer ",
      core::EchoValue(call.peer())));
}

grpc::ServerWriteReactor<v1::RegisterCudaRegionResponse>* CudaRegionsService::RegisterCudaRegion(
    grpc::CallbackServerContext* call, const v1::RegisterCudaRegionRequest* request) {
  return new RegionHoldReactor(context_, call, *request);
}

grpc::Status CudaRegionsService::UnregisterCudaRegion(grpc::ServerContext* call,
                                                      const v1::UnregisterCudaRegionRequest* request,
                                                      v1::UnregisterCudaRegionResponse* /*response*/) {
  absl::Status status = CheckBearerToken(*call, context_->auth_token);
  if (status.ok()) {
    const absl::Time call_deadline = absl::FromChrono(call->deadline());
    const absl::Time deadline = std::min(call_deadline, absl::Now() + kMaxUnregisterWait);
    status = context_->regions->Unregister(request->region_id(), deadline);
    if (status.ok()) {
      Log(LogLevel::kInfo, "cuda_region_released", {{"why", "unregistered"}, {"peer", call->peer()}});
    }
  }
  const grpc::Status out = ToGrpcStatus(status, call);
  CountRequest(context_, "UnregisterCudaRegion", out);
  return out;
}

}  // namespace spexd::server
