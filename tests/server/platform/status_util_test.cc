#include "server/platform/status_util.h"

#include "gtest/gtest.h"

namespace spexd::server {
namespace {

TEST(StatusUtilTest, KeepsCodeAndMessage) {
  const struct {
    absl::Status in;
    grpc::StatusCode out;
  } cases[] = {
      {absl::OkStatus(), grpc::StatusCode::OK},
      {absl::InvalidArgumentError("bad"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::NotFoundError("psf"), grpc::StatusCode::NOT_FOUND},
      {absl::ResourceExhaustedError("queue"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::UnavailableError("draining"), grpc::StatusCode::UNAVAILABLE},
      {absl::InternalError("cuda"), grpc::StatusCode::INTERNAL},
      {absl::PermissionDeniedError("path"), grpc::StatusCode::PERMISSION_DENIED},
      {absl::UnauthenticatedError("token"), grpc::StatusCode::UNAUTHENTICATED},
      {absl::DeadlineExceededError("late"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::CancelledError("gone"), grpc::StatusCode::CANCELLED},
  };
  for (const auto& c : cases) {
    grpc::Status g = ToGrpcStatus(c.in);
    EXPECT_EQ(g.error_code(), c.out) << c.in;
    EXPECT_EQ(g.error_message(), std::string(c.in.message()));
  }
  EXPECT_STREQ(GrpcCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_STREQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
}

}  // namespace
}  // namespace spexd::server
