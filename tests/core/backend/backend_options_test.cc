// The typed backend choices parse the spellings they print, and refuse the rest by name.
#include "core/backend/backend_options.h"

#include <gtest/gtest.h>

namespace spexd::core {
namespace {

TEST(BackendOptionsTest, HostWaitNamesAndDefault) {
  EXPECT_EQ(Name(CudaHostWait::kAuto), "auto");
  EXPECT_EQ(Name(CudaHostWait::kBlock), "block");
  EXPECT_EQ(BackendOptions{}.cuda_host_wait, CudaHostWait::kAuto);  // CUDA's own default
}

TEST(BackendOptionsTest, BackendKindRoundTripsAndRefusesOtherSpellings) {
  for (BackendKind k : {BackendKind::kCpu, BackendKind::kCuda}) {
    absl::StatusOr<BackendKind> parsed = ParseBackendKind(Name(k));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, k);
  }
  for (const char* bad : {"", "CPU", "gpu"}) {
    absl::StatusOr<BackendKind> parsed = ParseBackendKind(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace spexd::core
