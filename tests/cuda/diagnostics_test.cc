// The CUDA backend's environment switches (cuda/diagnostics.h): one table, production
// defaults when unset, and a bad value refused with the variable and its allowed values
// named. No GPU needed: the switches are read through an injected lookup.
#include "cuda/diagnostics.h"

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
                          std::map<std::string, std::string>{{"SPEXD_CUDA_TIMELINE", ""},
                                                             {"SPEXD_CUDA_PREFAULT", ""}}}) {
    absl::StatusOr<Diagnostics> d = Read(env);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->timeline);
    EXPECT_TRUE(d->batch_plan.empty());
    EXPECT_TRUE(d->upload_split);
    EXPECT_TRUE(d->prefault);
    EXPECT_TRUE(d->tridiag_register_reduce);
    EXPECT_TRUE(d->tridiag_register_rotate);
    EXPECT_TRUE(d->dmma_gram);
    EXPECT_TRUE(d->dmma_normal_equations);
    EXPECT_FALSE(d->band_inverse);
    EXPECT_TRUE(d->panel_p);
    EXPECT_TRUE(d->diag_update_in_factor);
    EXPECT_FALSE(d->prioritize_compute);
    EXPECT_FALSE(d->reduce_on_tail);
    EXPECT_TRUE(d->ne_ahead);
    EXPECT_TRUE(d->lone_frame_latency);
    EXPECT_TRUE(d->twisted_vectors);
    EXPECT_TRUE(d->compact_reflectors);
    EXPECT_TRUE(d->test_faults.empty());
  }
}

TEST(CudaDiagnosticsTest, EverySwitchIsRead) {
  absl::StatusOr<Diagnostics> d = Read({{"SPEXD_CUDA_TIMELINE", "1"},
                                        {"SPEXD_CUDA_BATCH_PLAN", "3,2,1"},
                                        {"SPEXD_CUDA_UPLOAD_SPLIT", "0"},
                                        {"SPEXD_CUDA_PREFAULT", "0"},
                                        {"SPEXD_CUDA_TRIDIAG_REDUCE", "shared"},
                                        {"SPEXD_CUDA_TRIDIAG_ROTATE", "shared"},
                                        {"SPEXD_CUDA_GRAM", "cublas"},
                                        {"SPEXD_CUDA_NORMAL_EQUATIONS", "entries"},
                                        {"SPEXD_CUDA_INVERSE", "band"},
                                        {"SPEXD_CUDA_INVERSE_P", "gemm"},
                                        {"SPEXD_CUDA_LEAF_INVERSE", "steps"},
                                        {"SPEXD_CUDA_CHOL_UPDATE", "gemm"},
                                        {"SPEXD_CUDA_STREAM_PRIORITY", "compute"},
                                        {"SPEXD_CUDA_REDUCE_STREAM", "tail"},
                                        {"SPEXD_CUDA_NE_STREAM", "compute"},
                                        {"SPEXD_CUDA_LONE_FRAME", "throughput"},
                                        {"SPEXD_CUDA_EIGENVECTORS", "rotate"},
                                        {"SPEXD_CUDA_REFLECTORS", "product"},
                                        {"SPEXD_TEST_CUDA_FAULTS", "oom_at_alloc=3"}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->timeline);
  EXPECT_EQ(d->batch_plan, (std::vector<int>{3, 2, 1}));
  EXPECT_FALSE(d->upload_split);
  EXPECT_FALSE(d->prefault);
  EXPECT_FALSE(d->tridiag_register_reduce);
  EXPECT_FALSE(d->tridiag_register_rotate);
  EXPECT_FALSE(d->dmma_gram);
  EXPECT_FALSE(d->dmma_normal_equations);
  EXPECT_TRUE(d->band_inverse);
  EXPECT_FALSE(d->panel_p);
  EXPECT_FALSE(d->tile_inverse);
  EXPECT_FALSE(d->diag_update_in_factor);
  EXPECT_TRUE(d->prioritize_compute);
  EXPECT_TRUE(d->reduce_on_tail);
  EXPECT_FALSE(d->ne_ahead);
  EXPECT_FALSE(d->lone_frame_latency);
  EXPECT_FALSE(d->twisted_vectors);
  EXPECT_FALSE(d->compact_reflectors);
  EXPECT_EQ(d->test_faults, "oom_at_alloc=3");
  d = Read({{"SPEXD_CUDA_TRIDIAG_REDUCE", "register"}, {"SPEXD_CUDA_TIMELINE", "0"}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->tridiag_register_reduce);
  EXPECT_FALSE(d->timeline);
  d = Read({{"SPEXD_CUDA_EIGENVECTORS", "twisted"}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->twisted_vectors);
}

TEST(CudaDiagnosticsTest, BadValuesAreRefusedNamingTheVariableAndAllowedValues) {
  struct Case {
    const char* name;
    const char* value;
    const char* allowed;
  };
  for (const Case& k : {Case{"SPEXD_CUDA_TIMELINE", "banana", "0 or 1"},
                        Case{"SPEXD_CUDA_UPLOAD_SPLIT", "off", "0 or 1"},
                        Case{"SPEXD_CUDA_PREFAULT", "2", "0 or 1"},
                        Case{"SPEXD_CUDA_BATCH_PLAN", "4,x", "bundles per batch"},
                        Case{"SPEXD_CUDA_BATCH_PLAN", "0", "bundles per batch"},
                        Case{"SPEXD_CUDA_TRIDIAG_REDUCE", "Shared", "register or shared"},
                        Case{"SPEXD_CUDA_TRIDIAG_ROTATE", "fast", "register or shared"},
                        Case{"SPEXD_CUDA_GRAM", "tensor", "dmma or cublas"},
                        Case{"SPEXD_CUDA_INVERSE", "dense", "trailing or band"},
                        Case{"SPEXD_CUDA_INVERSE_P", "cublas", "panel or gemm"},
                        Case{"SPEXD_CUDA_LEAF_INVERSE", "blocks", "tiles or steps"},
                        Case{"SPEXD_CUDA_CHOL_UPDATE", "cublas", "factor or gemm"},
                        Case{"SPEXD_CUDA_STREAM_PRIORITY", "high", "equal or compute"},
                        Case{"SPEXD_CUDA_REDUCE_STREAM", "copy", "compute or tail"},
                        Case{"SPEXD_CUDA_NE_STREAM", "tail", "compute or prep"},
                        Case{"SPEXD_CUDA_LONE_FRAME", "fast", "latency or throughput"},
                        Case{"SPEXD_CUDA_EIGENVECTORS", "jacobi", "twisted or rotate"},
                        Case{"SPEXD_CUDA_REFLECTORS", "wy", "compact or product"}}) {
    absl::StatusOr<Diagnostics> d = Read({{k.name, k.value}});
    ASSERT_FALSE(d.ok()) << k.name << "=" << k.value;
    EXPECT_TRUE(absl::IsInvalidArgument(d.status()));
    EXPECT_THAT(d.status().message(), HasSubstr(k.name));
    EXPECT_THAT(d.status().message(), HasSubstr(k.value));
    EXPECT_THAT(d.status().message(), HasSubstr(k.allowed));
  }
}

TEST(CudaDiagnosticsTest, TheTableListsEverySwitchOnce) {
  std::set<std::string> names;
  for (const EnvironmentSwitch& s : CudaEnvironmentSwitches()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_NE(std::string(s.allowed), "");
    EXPECT_NE(std::string(s.effect), "");
  }
  for (const char* name : {"SPEXD_CUDA_MODULE", "SPEXD_CUDA_TIMELINE", "SPEXD_CUDA_BATCH_PLAN",
                           "SPEXD_CUDA_UPLOAD_SPLIT", "SPEXD_CUDA_PREFAULT",
                           "SPEXD_CUDA_TRIDIAG_REDUCE", "SPEXD_CUDA_TRIDIAG_ROTATE", "SPEXD_CUDA_GRAM",
                           "SPEXD_CUDA_INVERSE", "SPEXD_CUDA_INVERSE_P", "SPEXD_CUDA_LEAF_INVERSE", "SPEXD_CUDA_CHOL_UPDATE", "SPEXD_CUDA_STREAM_PRIORITY", "SPEXD_CUDA_REDUCE_STREAM",
                           "SPEXD_CUDA_NE_STREAM", "SPEXD_CUDA_LONE_FRAME", "SPEXD_CUDA_EIGENVECTORS",
                           "SPEXD_TEST_CUDA_FAULTS"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
}

}  // namespace
}  // namespace spexd::cuda
