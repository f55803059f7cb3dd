#include "server/platform/status_util.h"

#include <string>

#include "absl/strings/cord.h"

namespace spexd::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share the canonical numbering (0..16); map
  // anything outside it to UNKNOWN rather than trusting a cast.
  const int code = static_cast<int>(status.code());
  const grpc::StatusCode grpc_code = (code >= 1 && code <= 16)
                                         ? static_cast<grpc::StatusCode>(code)
                                         : grpc::StatusCode::UNKNOWN;
  // Last line of defence against echoed input: a status message rides
  // in the trailing metadata, which clients cap (8 KiB by default); a longer one turns
  // the intended code into "metadata size exceeds limit".
  std::string message(status.message());
  if (message.size() > kMaxStatusMessageBytes) {
    const std::size_t full = message.size();
    message.resize(kMaxStatusMessageBytes);
    // Do not leave half a UTF-8 sequence at the cut.
    while (!message.empty() && (static_cast<unsigned char>(message.back()) & 0xC0) == 0x80) {
      message.pop_back();
    }
    if (!message.empty() && (static_cast<unsigned char>(message.back()) & 0x80) != 0) {
      message.pop_back();
    }
    message += "...(" + std::to_string(full) + " bytes)";
  }
  return grpc::Status(grpc_code, message);
}

namespace {
constexpr char kRetryablePayload[] = "type.spexd.dev/retryable";
}  // namespace

absl::Status Retryable(absl::Status status) {
  status.SetPayload(kRetryablePayload, absl::Cord("1"));
  return status;
}

bool IsRetryable(const absl::Status& status) {
  return status.GetPayload(kRetryablePayload).has_value();
}

grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* call) {
  if (call != nullptr && IsRetryable(status)) {
    call->AddTrailingMetadata(kRetryableMetadataKey, kRetryableMetadataValue);
  }
  return ToGrpcStatus(status);
}

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

}  // namespace spexd::server
