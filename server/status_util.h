// The one place where absl::Status becomes grpc::Status (style.md "Errors", Triton §2.2).
// Everything below the service layer speaks absl::Status with canonical codes.
#ifndef SPEXD_SERVER_STATUS_UTIL_H_
#define SPEXD_SERVER_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include <cstddef>

#include "absl/status/status.h"

namespace spexd::server {

// Longest status message sent to a client; longer ones are cut (with their length noted).
inline constexpr std::size_t kMaxStatusMessageBytes = 2048;

// Same code (the canonical codes are numerically identical), same message up to
// kMaxStatusMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The code's canonical name (e.g. "RESOURCE_EXHAUSTED"), used as a metric label.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_STATUS_UTIL_H_
