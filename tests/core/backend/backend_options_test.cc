// The typed backend choices parse the spellings they print, and refuse the rest by name.
#include "core/backend/backend_options.h"

#include <gtest/gtest.h>

namespace spexd::core {
namespace {

TEST(BackendOptionsTest, HostWaitRoundTripsEverySpelling) {
  for (CudaHostWait w : {CudaHostWait::kAuto, CudaHostWait::kSpin, CudaHostWait::kYield,
                         CudaHostWait::kBlock}) {
    absl::StatusOr<CudaHostWait> parsed = ParseCudaHostWait(Name(w));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, w);
  }
  EXPECT_EQ(Name(CudaHostWait::kBlock), "block");
  EXPECT_EQ(BackendOptions{}.cuda_host_wait, CudaHostWait::kAuto);  // CUDA's own default
}

TEST(BackendOptionsTest, HostWaitRefusesOtherSpellings) {
  for (const char* bad : {"", "Block", "blocking", "sleep"}) {
    absl::StatusOr<CudaHostWait> parsed = ParseCudaHostWait(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("'block'"), absl::string_view::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace spexd::core
