#include "server/rpc/admin_service.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/error_text.h"
#include "core/base/status_macros.h"
#include "core/base/version.h"
#include "server/rpc/auth.h"
#include "server/rpc/call_watchdog.h"
#include "server/platform/data_roots.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/jobs/proto_convert.h"
#include "server/rpc/request_decode.h"
#include "server/state/psf_cache.h"
#include "server/state/scheduler.h"
#include "server/platform/status_util.h"
#include "server/rpc/upload_assembly.h"

namespace spexd::server {
namespace {

// The watchdog's view of a sync LoadPsf call: waiting on the client while blocked in
// Read; cancelled (TryCancel, which makes that Read return false) when idle too long.
class PsfUploadWatch final : public CallWatchdog::Watched {
 public:
  PsfUploadWatch(CallWatchdog* watchdog, grpc::ServerContext* call)
      : watchdog_(watchdog), call_(call) {
    if (watchdog_ != nullptr) watchdog_->Add(this);
  }
  ~PsfUploadWatch() override {
    if (watchdog_ != nullptr) watchdog_->Remove(this);
  }
  PsfUploadWatch(const PsfUploadWatch&) = delete;
  PsfUploadWatch& operator=(const PsfUploadWatch&) = delete;

  bool Read(grpc::ServerReader<v1::LoadPsfRequest>* reader, v1::LoadPsfRequest* msg) {
    SetReading(true);
    const bool ok = reader->Read(msg);
    SetReading(false);
    return ok;
  }
  bool stalled() const { return stalled_.load(); }
  bool drained() const { return drained_.load(); }
  // Data arrived (the header, a non-empty chunk): restarts the idle clock. An empty
  // chunk does not.
  void Progress() {
    absl::MutexLock lock(&mu_);
    last_ = CallWatchdog::Clock::now();
  }
  void set_uploading() { uploading_.store(true); }

  bool WaitingOnClient(CallWatchdog::Clock::time_point* since,
                       CallWatchdog::Stall* kind) override {
    absl::MutexLock lock(&mu_);
    *since = last_;
    *kind = CallWatchdog::Stall::kUpload;
    return reading_;
  }
  void Expire(CallWatchdog::Stall) override {
    stalled_.store(true);
    Log(LogLevel::kWarning, "upload_stalled", {{"rpc", "LoadPsf"}, {"peer", call_->peer()}});
    call_->TryCancel();
  }
  // Draining: an upload blocked in Read is cancelled now (the sync API has no other way
  // to end a Read), not after the client sent it all.
  void Drain() override {
    {
      absl::MutexLock lock(&mu_);
      if (!reading_ || !uploading_.load()) return;
    }
    drained_.store(true);
    Log(LogLevel::kInfo, "upload_refused_draining", {{"rpc", "LoadPsf"}, {"peer", call_->peer()}});
    call_->TryCancel();
  }

 private:
  void SetReading(bool reading) {
    absl::MutexLock lock(&mu_);
    reading_ = reading;
  }

  CallWatchdog* const watchdog_;
  grpc::ServerContext* const call_;
  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  CallWatchdog::Clock::time_point last_ ABSL_GUARDED_BY(mu_) = CallWatchdog::Clock::now();
  std::atomic<bool> stalled_{false};
  std::atomic<bool> drained_{false};
  std::atomic<bool> uploading_{false};  // past the upload header
};

void CountAborted(ServiceContext* context, const char* reason) {
  if (context->env.metrics != nullptr) context->env.metrics->CountUploadAborted(reason);
}

absl::Status DrainingUpload(ServiceContext* context) {
  CountAborted(context, "draining");
  return absl::UnavailableError("server is draining: PSF upload refused; retry after the restart");
}

absl::Status StalledUpload(double idle_seconds) {
  return absl::DeadlineExceededError(absl::StrCat(
      "PSF upload sent nothing for ", idle_seconds, " s (--upload_idle_seconds): cancelled"));
}

// Reads a LoadPsf stream: one server_path message, or an upload header and its chunks.
// An upload holds one of the scheduler's upload slots (the same bound as image uploads)
// and is cut off when idle; its buffer grows with the data received, never with what
// the header announces.
absl::Status ReadPsfSource(grpc::ServerContext* call,
                           grpc::ServerReader<v1::LoadPsfRequest>* reader,
                           ServiceContext* context, std::string* bytes, std::string* source) {
  const int64_t max_bytes = context->env.limits.max_upload_bytes;
  const double idle = context->env.limits.upload_idle_seconds;
  PsfUploadWatch watch(context->watchdog, call);
  v1::LoadPsfRequest msg;
  if (!watch.Read(reader, &msg)) {
    return watch.stalled() ? StalledUpload(idle)
                           : absl::InvalidArgumentError("LoadPsf stream carried no message");
  }
  if (msg.kind_case() == v1::LoadPsfRequest::kServerPath) {
    SPEXD_RETURN_IF_ERROR(CheckServerPath("server_path", msg.server_path()));
    SPEXD_ASSIGN_OR_RETURN(DataRoots::File file,
                           context->env.roots->ReadFile(msg.server_path(), max_bytes));
    *bytes = std::move(file.bytes);
    *source = file.path;
    return absl::OkStatus();
  }
  if (msg.kind_case() != v1::LoadPsfRequest::kUpload) {
    return absl::InvalidArgumentError("LoadPsf starts with server_path or an upload header");
  }
  const int64_t size = msg.upload().size();
  if (msg.upload().name().size() > HeaderLimits::kMaxNameChars) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PSF upload name is ", msg.upload().name().size(), " bytes, over the limit of ",
        HeaderLimits::kMaxNameChars, ": '", core::EchoValue(msg.upload().name()), "'"));
  }
  *source = msg.upload().name().empty() ? std::string("upload") : msg.upload().name();
  if (size <= 0) return absl::InvalidArgumentError("PSF upload: size must be positive");
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("PSF upload of ", size,
                                                     " bytes is over the limit of ", max_bytes));
  }
  SPEXD_ASSIGN_OR_RETURN(Scheduler::Ticket slot,
                         context->scheduler->ReserveUpload(/*realtime=*/false, /*then_queue=*/false));
  UploadAssembly upload(size);
  const ServiceLimits& limits = context->env.limits;
  UploadRateFloor rate_floor(limits.upload_min_bytes_per_second,
                             limits.upload_rate_window_seconds, CallWatchdog::Clock::now());
  watch.Progress();
  watch.set_uploading();
  while (!upload.complete()) {
    if (!watch.Read(reader, &msg)) {
      if (watch.drained()) return DrainingUpload(context);
      if (watch.stalled()) {
        CountAborted(context, "idle");
        return StalledUpload(idle);
      }
      return absl::InvalidArgumentError(absl::StrCat("truncated PSF upload: ", upload.received(),
                                                     " of ", size, " bytes"));
    }
    if (msg.kind_case() != v1::LoadPsfRequest::kChunk) {
      return absl::InvalidArgumentError("expected PSF upload chunks after the header");
    }
    if (context->draining.load()) return DrainingUpload(context);
    if (!upload.Append(msg.chunk())) {
      return absl::InvalidArgumentError("PSF upload is longer than announced");
    }
    if (!msg.chunk().empty()) watch.Progress();
    if (context->env.metrics != nullptr) {
      context->env.metrics->AddUploadBytes(static_cast<double>(msg.chunk().size()));
    }
    if (upload.complete()) break;
    if (absl::Status s =
            rate_floor.Check(upload.received(), size, CallWatchdog::Clock::now());
        !s.ok()) {
      CountAborted(context, "slow");
      Log(LogLevel::kWarning, "upload_too_slow",
          {{"rpc", "LoadPsf"}, {"peer", call->peer()}, {"error", std::string(s.message())}});
      return s;
    }
  }
  *bytes = upload.Take();
  return absl::OkStatus();
}

}  // namespace

grpc::Status AdminService::Done(const char* rpc, const absl::Status& status,
                                grpc::ServerContext* call) {
  grpc::Status out = ToGrpcStatus(status, call);
  if (context_->env.metrics != nullptr) {
    context_->env.metrics->CountRequest(rpc, GrpcCodeName(out.error_code()));
  }
  return out;
}

grpc::Status AdminService::LoadPsf(grpc::ServerContext* call,
                                   grpc::ServerReader<v1::LoadPsfRequest>* reader,
                                   v1::PsfInfo* response) {
  absl::Status status = CheckBearerToken(*call, context_->auth_token);
  if (status.ok()) {
    std::string bytes, source;
    status = ReadPsfSource(call, reader, context_, &bytes, &source);
    if (status.ok()) {
      auto loaded = context_->env.cache->Load(bytes, source, FitsLimits(context_->env.limits));
      if (loaded.ok()) {
        PsfSummaryToProto(*loaded, context_->scheduler->BackendMemory(), response);
        Log(LogLevel::kInfo, "psf_loaded",
            {{"id", loaded->id}, {"source", source}, {"bytes", loaded->host_bytes},
             {"already_loaded", loaded->already_loaded}});
      }
      status = loaded.status();
    }
  }
  return Done("LoadPsf", status, call);
}

grpc::Status AdminService::ListPsfs(grpc::ServerContext* call, const v1::ListPsfsRequest*,
                                    v1::ListPsfsResponse* response) {
  absl::Status status = CheckBearerToken(*call, context_->auth_token);
  if (status.ok()) {
    // The summaries hold their geometries, so the addresses the backends report them
    // under stay unique while the two are matched.
    const std::vector<PsfSummary> psfs = context_->env.cache->List();
    const std::vector<core::BackendMemory> memory = context_->scheduler->BackendMemory();
    for (const PsfSummary& s : psfs) PsfSummaryToProto(s, memory, response->add_psfs());
    response->set_cache_bytes(context_->env.cache->bytes());
    response->set_cache_budget_bytes(context_->env.cache->budget());
  }
  return Done("ListPsfs", status);
}

grpc::Status AdminService::UnloadPsf(grpc::ServerContext* call, const v1::UnloadPsfRequest* request,
                                     v1::UnloadPsfResponse* response) {
  absl::Status status = CheckBearerToken(*call, context_->auth_token);
  if (status.ok()) {
    auto freed = context_->env.cache->Unload(request->id());
    if (freed.ok()) {
      response->set_freed_bytes(*freed);
      Log(LogLevel::kInfo, "psf_unloaded", {{"id", request->id()}, {"bytes", *freed}});
    }
    status = freed.status();
  }
  return Done("UnloadPsf", status);
}

grpc::Status AdminService::GetServerInfo(grpc::ServerContext* call, const v1::GetServerInfoRequest*,
                                         v1::ServerInfo* response) {
  absl::Status status = CheckBearerToken(*call, context_->auth_token);
  if (status.ok()) {
    response->set_version(core::kSpexdVersion);
    response->set_api_version("spexd.v1");
    for (const WorkerState& w : context_->scheduler->Workers()) {
      WorkerStateToProto(w, response->add_workers());
    }
    auto [gpus, choice] = context_->BackendChoice();
    response->set_gpu_count(gpus);
    response->set_backend_choice(choice);
    const Scheduler::Load load = context_->scheduler->CurrentLoad();
    LimitsToProto(context_->env.limits, load, context_->env.cache->budget(),
                  response->mutable_limits());
    response->set_queue_depth(load.queued);
    response->set_uploads_in_progress(load.uploads);
    response->set_running(load.running);
    response->set_serving(context_->serving.load());
    response->set_tls(context_->tls);
    response->set_auth_required(!context_->auth_token.empty());
    response->set_uptime_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - context_->started).count());
  }
  return Done("GetServerInfo", status);
}

}  // namespace spexd::server
