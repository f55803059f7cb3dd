#include "server/rpc/extract_request_reader.h"

#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/rpc/request_admission.h"
#include "spexd/v1/spexd.grpc.pb.h"  // SerializationTraits for protobuf messages

namespace spexd::server {

const char kDrainingUpload[] =
    "server is draining: the request was refused before it was complete; retry elsewhere "
    "or after the restart";

ExtractRequestReader::ExtractRequestReader(ServiceContext* service, bool subset,
                                           const std::string& rpc, const std::string& peer,
                                           Clock::time_point arrived, Clock::time_point deadline)
    : service_(service),
      subset_(subset),
      rpc_(rpc),
      peer_(peer),
      arrived_(arrived),
      deadline_(deadline) {}

absl::StatusOr<ExtractRequestReader::Next> ExtractRequestReader::OnMessage(bool* progress) {
  *progress = false;
  SPEXD_RETURN_IF_ERROR(Parse());
  return phase_ == Phase::kHeader ? OnHeader(progress) : OnChunk(progress);
}

absl::Status ExtractRequestReader::ReadFailed(bool stalled, bool cancelled) {
  if (stalled) {
    if (phase_ == Phase::kUpload) CountAborted("idle");
    return absl::DeadlineExceededError(absl::StrCat(
        phase_ == Phase::kHeader ? "no ExtractHeader" : "no upload data", " for ",
        service_->env.limits.upload_idle_seconds,
        " s (--upload_idle_seconds): the call was cancelled"));
  }
  if (phase_ == Phase::kHeader) {
    return cancelled ? absl::CancelledError("cancelled before the request header")
                     : absl::InvalidArgumentError("stream closed before an ExtractHeader");
  }
  return cancelled ? absl::CancelledError("upload cancelled")
                   : absl::InvalidArgumentError(absl::StrCat(
                         "truncated upload: the stream ended after ", upload_.received(),
                         " of the announced ", upload_.announced(), " bytes"));
}

void ExtractRequestReader::CountAborted(const char* reason) {
  if (service_->env.metrics != nullptr) service_->env.metrics->CountUploadAborted(reason);
}

// The raw request bytes as an ExtractRequest (what the generated handler would do).
absl::Status ExtractRequestReader::Parse() {
  incoming_.Clear();
  grpc::Status s = grpc::SerializationTraits<v1::ExtractRequest>::Deserialize(&raw_, &incoming_);
  if (!s.ok()) return absl::InvalidArgumentError("malformed ExtractRequest message");
  return absl::OkStatus();
}

absl::StatusOr<ExtractRequestReader::Next> ExtractRequestReader::OnHeader(bool* progress) {
  if (incoming_.kind_case() != v1::ExtractRequest::kHeader) {
    return absl::InvalidArgumentError("the first message must be an ExtractHeader");
  }
  if (!service_->serving.load()) {
    return absl::UnavailableError(service_->draining.load() ? "server is draining"
                                                            : "server is warming up");
  }
  const v1::ExtractHeader& h = incoming_.header();
  // Every parameter once, here, before any upload, file or geometry.
  SPEXD_ASSIGN_OR_RETURN(request_, AdmitHeader(service_->env, h, subset_, nullptr));
  request_.arrived = arrived_;
  request_.peer = peer_;
  request_.deadline = deadline_;
  if (h.has_cuda_image() || h.has_cuda_output()) {
    // Held by the job from here: an unregister waits for it (region_registry.h).
    if (service_->regions == nullptr) {
      return absl::FailedPreconditionError("this server takes no CUDA regions");
    }
    SPEXD_ASSIGN_OR_RETURN(request_.cuda, ResolveCudaRegions(h, *service_->regions));
  }
  if (h.image_case() != v1::ExtractHeader::kUploadSize) {
    SPEXD_ASSIGN_OR_RETURN(ticket_, service_->scheduler->Reserve(request_.realtime));
    phase_ = Phase::kComplete;
    return Next::kSubmit;
  }
  // An upload holds an upload slot (counted apart from queued work); its queue slot
  // is taken when the upload is complete.
  SPEXD_ASSIGN_OR_RETURN(ticket_, service_->scheduler->ReserveUpload(request_.realtime,
                                                                     /*then_queue=*/true));
  upload_ = UploadAssembly(h.upload_size(), UploadAssembly::kImageReserve);
  const ServiceLimits& limits = service_->env.limits;
  rate_floor_ = UploadRateFloor(limits.upload_min_bytes_per_second,
                                limits.upload_rate_window_seconds, Clock::now());
  *progress = true;  // the idle clock starts with the upload
  phase_ = Phase::kUpload;
  return Next::kRead;
}

absl::StatusOr<ExtractRequestReader::Next> ExtractRequestReader::OnChunk(bool* progress) {
  if (incoming_.kind_case() != v1::ExtractRequest::kChunk) {
    return absl::InvalidArgumentError("expected an UploadChunk after the header");
  }
  // Draining: refused now rather than after the whole upload.
  if (service_->draining.load()) {
    CountAborted("draining");
    return absl::UnavailableError(kDrainingUpload);
  }
  const std::string& data = incoming_.chunk().data();
  if (!upload_.Append(data)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "upload is longer than the announced upload_size of ", upload_.announced(), " bytes"));
  }
  *progress = !data.empty();  // an empty chunk is no progress: it must not keep an upload alive
  if (service_->env.metrics != nullptr) {
    service_->env.metrics->AddUploadBytes(static_cast<double>(data.size()));
  }
  if (!upload_.complete()) {
    if (absl::Status s = rate_floor_.Check(upload_.received(), upload_.announced(), Clock::now());
        !s.ok()) {
      CountAborted("slow");
      Log(LogLevel::kWarning, "upload_too_slow",
          {{"rpc", rpc_}, {"peer", peer_}, {"error", std::string(s.message())}});
      return s;
    }
    return Next::kRead;
  }
  request_.image.upload = upload_.Take();
  // The queue slot, which frees the upload slot.
  SPEXD_ASSIGN_OR_RETURN(ticket_, service_->scheduler->Reserve(ticket_.realtime()));
  phase_ = Phase::kComplete;
  return Next::kSubmit;
}

}  // namespace spexd::server
