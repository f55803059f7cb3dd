// The CPU backend's environment switch (SPEXD_CPU_EIGEN, docs/service.md): a mistyped value
// fails the backend's creation, naming the variable, instead of being ignored.
#include <cstdlib>

#include "core/backend/backend.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

absl::Status CreateWith(const char* value) {
  if (value == nullptr) {
    unsetenv("SPEXD_CPU_EIGEN");
  } else {
    setenv("SPEXD_CPU_EIGEN", value, 1);
  }
  BackendOptions o;
  o.kind = BackendKind::kCpu;
  o.threads = 1;
  absl::Status s = CreateBackend(o).status();
  unsetenv("SPEXD_CPU_EIGEN");
  return s;
}

TEST(CpuEnvironmentTest, TheEigenSwitchTakesItsValuesAndRefusesOthers) {
  EXPECT_TRUE(CreateWith(nullptr).ok());
  EXPECT_TRUE(CreateWith("").ok());
  EXPECT_TRUE(CreateWith("lanes").ok());
  EXPECT_TRUE(CreateWith("lapack").ok());
  const absl::Status bad = CreateWith("lapak");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("SPEXD_CPU_EIGEN='lapak'"), std::string::npos) << bad;
}

}  // namespace
}  // namespace spexd::core
