// The CPU backend's environment switches (SPEXD_CPU_EIGEN, SPEXD_CPU_NORMAL_EQUATIONS,
// docs/service.md): a mistyped value fails the backend's creation, naming the variable,
// instead of being ignored.
#include <cstdlib>

#include "core/backend/backend.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

absl::Status CreateWith(const char* value, const char* name = "SPEXD_CPU_EIGEN") {
  if (value == nullptr) {
    unsetenv(name);
  } else {
    setenv(name, value, 1);
  }
  BackendOptions o;
  o.kind = BackendKind::kCpu;
  o.threads = 1;
  absl::Status s = CreateBackend(o).status();
  unsetenv(name);
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

TEST(CpuEnvironmentTest, TheNormalEquationsSwitchTakesItsValuesAndRefusesOthers) {
  constexpr const char* kName = "SPEXD_CPU_NORMAL_EQUATIONS";
  EXPECT_TRUE(CreateWith(nullptr, kName).ok());
  EXPECT_TRUE(CreateWith("", kName).ok());
  EXPECT_TRUE(CreateWith("tiles", kName).ok());
  EXPECT_TRUE(CreateWith("runs", kName).ok());
  const absl::Status bad = CreateWith("tile", kName);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("SPEXD_CPU_NORMAL_EQUATIONS='tile'"), std::string::npos) << bad;
}

}  // namespace
}  // namespace spexd::core
