// The CUDA backend's environment variables (cuda/host/diagnostics.h): one table, production
// defaults when unset, a bad value refused with the variable and its allowed values
// named, and no algorithm or schedule switch among them. No GPU needed: the variables
// are read through an injected lookup.
#include "cuda/host/diagnostics.h"

#include <map>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace spexd::cuda {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::string>* g_env = nullptr;

const char* Lookup(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

absl::StatusOr<Diagnostics> Read(std::map<std::string, std::string> env) {
  g_env = &env;
  absl::StatusOr<Diagnostics> d = DiagnosticsFromEnvironment(&Lookup);
  g_env = nullptr;
  return d;
}

TEST(CudaDiagnosticsTest, UnsetOrEmptyMeansTheProductionDefaults) {
  for (const auto& env : {std::map<std::string, std::string>{},
                          std::map<std::string, std::string>{{"SPEXD_CUDA_TIMELINE", ""}}}) {
    absl::StatusOr<Diagnostics> d = Read(env);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->timeline);
    EXPECT_TRUE(d->test_faults.empty());
  }
}

TEST(CudaDiagnosticsTest, EverySwitchIsRead) {
  absl::StatusOr<Diagnostics> d =
      Read({{"SPEXD_CUDA_TIMELINE", "1"}, {"SPEXD_TEST_CUDA_FAULTS", "oom_at_alloc=3"}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->timeline);
  EXPECT_EQ(d->test_faults, "oom_at_alloc=3");
  d = Read({{"SPEXD_CUDA_TIMELINE", "0"}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->timeline);
}

TEST(CudaDiagnosticsTest, BadValuesAreRefusedNamingTheVariableAndAllowedValues) {
  for (const char* bad : {"on", "2", "yes"}) {
    absl::StatusOr<Diagnostics> d = Read({{"SPEXD_CUDA_TIMELINE", bad}});
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(d.status()));
    EXPECT_THAT(d.status().message(), HasSubstr("SPEXD_CUDA_TIMELINE"));
    EXPECT_THAT(d.status().message(), HasSubstr(bad));
    EXPECT_THAT(d.status().message(), HasSubstr("0 or 1"));
  }
}

// The table is the whole list: the module path, the timeline and the test faults.
// Algorithm and schedule variables that a build once read are ignored, not refused: an
// old deployment's environment still starts.
TEST(CudaDiagnosticsTest, TheTableListsTheThreeVariablesOnce) {
  std::set<std::string> names;
  for (const EnvironmentSwitch& s : CudaEnvironmentSwitches()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_NE(std::string(s.allowed), "");
    EXPECT_NE(std::string(s.effect), "");
  }
  EXPECT_EQ(names, (std::set<std::string>{"SPEXD_CUDA_MODULE", "SPEXD_CUDA_TIMELINE",
                                          "SPEXD_TEST_CUDA_FAULTS"}));
  absl::StatusOr<Diagnostics> d = Read({{"SPEXD_CUDA_EIGENVECTORS", "rotate"}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->timeline);
}

}  // namespace
}  // namespace spexd::cuda
