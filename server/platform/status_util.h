// The one place where absl::Status becomes grpc::Status (docs/design.md "Conventions",
// Triton §2.2). Everything below the service layer speaks absl::Status with canonical codes.
#ifndef SPEXD_SERVER_STATUS_UTIL_H_
#define SPEXD_SERVER_STATUS_UTIL_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <cstddef>

#include "absl/status/status.h"

namespace spexd::server {

// Longest status message sent to a client; longer ones are cut (with their length noted).
inline constexpr std::size_t kMaxStatusMessageBytes = 2048;

// Same code (the canonical codes are numerically identical), same message up to
// kMaxStatusMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);
// The same, and a status marked Retryable also tells the client so through trailing
// metadata of `call` (kRetryableMetadataKey).
grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* call);

// Trailing metadata key ("spexd-retryable: queue-full") on a RESOURCE_EXHAUSTED that is
// transient (the queue or the upload slots are full now): clients retry it with backoff
// within their deadline. Over-limit requests (an upload over --max_upload_bytes) never
// fit and are not marked.
inline constexpr char kRetryableMetadataKey[] = "spexd-retryable";
inline constexpr char kRetryableMetadataValue[] = "queue-full";

// Marks `status` as transient (see above); IsRetryable reads the mark.
absl::Status Retryable(absl::Status status);
bool IsRetryable(const absl::Status& status);

// The code's canonical name (e.g. "RESOURCE_EXHAUSTED"), used as a metric label.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_STATUS_UTIL_H_
