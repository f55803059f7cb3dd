// The dlopen() boundary refuses to pair a CUDA module and an executable from different
// builds (core/backend/module_identity.h, core/backend/cuda_module_loader.h). Needs no GPU: the refused
// module is tests/core/foreign_module.cc.
#include "core/backend/module_identity.h"

#include <string>

#include "core/backend/backend.h"
#include "core/backend/cuda_module_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

using ::testing::HasSubstr;

TEST(ModuleIdentity, ThisBuildHasBothParts) {
  EXPECT_THAT(ThisBuild().build_id, HasSubstr("/"));
  EXPECT_EQ(ThisBuild().boundary_checksum.size(), 16u);
  EXPECT_TRUE(CheckSameBuild(ThisBuild(), ThisBuild(), "host").ok());
}

TEST(ModuleIdentity, DifferentBuildIdOrChecksumIsRefusedNamingBoth) {
  BuildIdentity other = ThisBuild();
  other.build_id = "0.0.0/elsewhere/000000000000";
  absl::Status s = CheckSameBuild(ThisBuild(), other, "host executable");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("not the same build"));
  EXPECT_THAT(s.message(), HasSubstr(ThisBuild().build_id));
  EXPECT_THAT(s.message(), HasSubstr(other.build_id));

  other = ThisBuild();
  other.boundary_checksum = "0123456789abcdef";
  s = CheckSameBuild(ThisBuild(), other, "host executable");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("0123456789abcdef"));
}

TEST(ModuleIdentity, CopyMessageTruncatesAndTerminates) {
  char buf[6];
  CopyMessage("refused here", buf, sizeof(buf));
  EXPECT_STREQ(buf, "refus");
  CopyMessage("x", nullptr, 0);  // no buffer: nothing written, no crash
}

TEST(ModuleIdentity, LoaderRefusesAModuleOfAnotherBuild) {
  BackendOptions options;
  options.kind = BackendKind::kCuda;
  options.cuda_module = SPEXD_FOREIGN_MODULE_PATH;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(absl::IsUnavailable(backend.status())) << backend.status();
  EXPECT_THAT(backend.status().message(), HasSubstr("refused"));
  EXPECT_THAT(backend.status().message(), HasSubstr("not the same build"));
  EXPECT_THAT(backend.status().message(), HasSubstr("foreign0token"));
  EXPECT_THAT(backend.status().message(), HasSubstr(ThisBuild().build_id));
  std::string reason;
  EXPECT_EQ(CudaDeviceCount(options, &reason), 0);
  EXPECT_THAT(reason, HasSubstr("not the same build"));
}

TEST(ModuleIdentity, LoaderReportsAMissingModule) {
  BackendOptions options;
  options.kind = BackendKind::kCuda;
  options.cuda_module = "/nonexistent/libspexd_cuda.so";
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(absl::IsUnavailable(backend.status())) << backend.status();
  EXPECT_THAT(backend.status().message(), HasSubstr("/nonexistent/libspexd_cuda.so (absent)"));
}

}  // namespace
}  // namespace spexd::core
