// The one place where absl::Status becomes grpc::Status (style.md "Errors", Triton §2.2).
// Everything below the service layer speaks absl::Status with canonical codes.
#ifndef SPEXD_SERVER_STATUS_UTIL_H_
#define SPEXD_SERVER_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace spexd::server {

// Same code (the canonical codes are numerically identical), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The code's canonical name (e.g. "RESOURCE_EXHAUSTED"), used as a metric label.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_STATUS_UTIL_H_
