// The host-cost benchmark's replay backend takes raw planes, as the CUDA backend does,
// so that a served frame's load is the GPU server's; its recording (the CPU backend, which
// takes decoded planes only) is made from the decoded frame and replays the CPU backend's
// results for it.
#include "tests/bench/replay_backend.h"

#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend/backend_options.h"
#include "core/io/plane_buffer.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::bench {
namespace {

// The frame's float32 planes as raw planes: the file's big-endian words, no MASK.
core::PreprocImage RawPlanesOf(const core::PreprocImage& f32) {
  core::PreprocImage raw;
  raw.height = f32.height;
  raw.width = f32.width;
  const std::size_t n = f32.image32.size();
  raw.image_raw = core::PlaneBuffer<uint32_t>::Make(n, nullptr);
  raw.ivar_raw = core::PlaneBuffer<uint32_t>::Make(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    raw.image_raw[i] = __builtin_bswap32(std::bit_cast<uint32_t>(f32.image32[i]));
    raw.ivar_raw[i] = __builtin_bswap32(std::bit_cast<uint32_t>(f32.ivar32[i]));
  }
  return raw;
}

TEST(ReplayBackendTest, RawPlanesReplayTheCpuBackendsResultsForTheDecodedFrame) {
  auto geometry = testing::SmallBundledGeometry();
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  const core::PatchPlan& plan = (*geometry)->plan();
  core::PreprocImage f32;
  f32.height = plan.image_height;
  f32.width = plan.image_width;
  const std::size_t n = static_cast<std::size_t>(f32.height) * f32.width;
  f32.image32 = core::PlaneBuffer<float>::Make(n, nullptr);
  f32.ivar32 = core::PlaneBuffer<float>::Make(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    f32.image32[i] = static_cast<float>(i % 97) * 0.25f;
    f32.ivar32[i] = i % 1009 == 0 ? -1.0f : 0.5f;  // a negative ivar: a rule to apply
  }
  const core::PreprocImage raw = RawPlanesOf(f32);

  core::ExtractionJob job;
  job.geometry = *geometry;
  job.image = &raw;
  auto store = std::make_shared<ReplayStore>(/*recorder_threads=*/1, /*dir=*/"");
  ReplayBackend replay(store);
  auto replayed = testing::ExtractBundles(replay, job);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_EQ(store->recordings(), 1);

  core::BackendOptions options;
  options.kind = core::BackendKind::kCpu;
  options.threads = 1;
  auto cpu = core::CreateBackend(options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  core::PreprocImage decoded = raw;
  core::DecodeRawPlanes(&decoded);
  job.image = &decoded;
  auto expected = testing::ExtractBundles(**cpu, job);
  ASSERT_TRUE(expected.ok()) << expected.status();

  ASSERT_EQ(replayed->size(), expected->size());
  ASSERT_EQ(replayed->size(), static_cast<std::size_t>(plan.nbundles));
  for (std::size_t b = 0; b < expected->size(); ++b) {
    EXPECT_EQ((*replayed)[b].bundle, (*expected)[b].bundle);
    EXPECT_EQ((*replayed)[b].flux, (*expected)[b].flux) << "bundle " << b;
    EXPECT_EQ((*replayed)[b].ivar, (*expected)[b].ivar) << "bundle " << b;
    EXPECT_EQ((*replayed)[b].chi2pix, (*expected)[b].chi2pix) << "bundle " << b;
  }
}

}  // namespace
}  // namespace spexd::bench
