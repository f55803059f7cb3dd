// Raw planes (PreprocImage::image_raw: a preproc file's big-endian float32 words and its
// MASK bits, no rule applied on the host) are decoded and ruled on the device in one pass
// (cuda/kernels/image_import.cu). On crafted planes (NaN, +-Inf, negative and -0 ivar,
// every MASK bit, under both mask policies) the spectra are bit-identical to those of the
// same planes ruled on the host (DecodeRawPlanes), and the device counts what the host
// counts. Label "gpu": skips without a device.
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/backend/backend.h"
#include "core/io/plane_buffer.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/extract_run.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

uint32_t BigEndianWord(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return __builtin_bswap32(u);
}

// The frame's planes as a preproc file stores them, with special values and MASK bits
// spread over the whole CCD (so also under the extracted traces): every 13th pixel holds
// one of the cases below, in turn.
core::PreprocImage RawPlanes(const core::PreprocImage& frame, core::MaskPolicy policy,
                             core::PlaneBufferPool* pool) {
  const std::size_t n = frame.image.size();
  std::vector<float> image(frame.image.begin(), frame.image.end());
  std::vector<float> ivar(frame.ivar.begin(), frame.ivar.end());
  std::vector<uint16_t> mask(n, 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  int k = 0;
  for (std::size_t i = 7; i < n; i += 13, ++k) {
    const int c = k % 24;
    if (c < 16) {
      mask[i] = static_cast<uint16_t>(1u << c);  // every bit: bad under one policy or both
    } else if (c == 16) {
      image[i] = nan;
    } else if (c == 17) {
      image[i] = inf;
    } else if (c == 18) {
      ivar[i] = -inf;
    } else if (c == 19) {
      ivar[i] = nan;
    } else if (c == 20) {
      ivar[i] = -1.5f;  // negative: unmeasured, counted as masked
    } else if (c == 21) {
      ivar[i] = -0.0f;  // kept as it is
    } else if (c == 22) {
      image[i] = -inf;
      mask[i] = 0x0101;  // non-finite and masked at once: counted in both
    } else {
      mask[i] = 0x0100;  // BADREADNOISE alone: kept under desispec's policy
    }
  }
  core::PreprocImage raw;
  raw.height = frame.height;
  raw.width = frame.width;
  raw.source_name = "crafted";
  raw.image_raw = core::PlaneBuffer<uint32_t>::Make(n, pool);
  raw.ivar_raw = core::PlaneBuffer<uint32_t>::Make(n, pool);
  raw.mask_raw = core::PlaneBuffer<uint16_t>::Make(n, pool);
  for (std::size_t i = 0; i < n; ++i) {
    raw.image_raw[i] = BigEndianWord(image[i]);
    raw.ivar_raw[i] = BigEndianWord(ivar[i]);
    raw.mask_raw[i] = mask[i];
  }
  raw.raw_bad_bits = core::MaskBadBits(policy);
  return raw;
}

using Run = ExtractRun;

absl::StatusOr<Run> Extract(core::Backend& b, const std::shared_ptr<const core::Geometry>& g,
                            const core::PreprocImage& image) {
  return ExtractAll(b, g, image, /*want_model=*/true);
}

TEST(CudaRawPlanes, RuledOnTheDeviceAsOnTheHost) {
  absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
  ASSERT_TRUE(options.ok()) << options.status();
  auto backend = core::CreateBackend(*options);
  if (!backend.ok()) GTEST_SKIP() << "CUDA backend unavailable: " << backend.status();
  ASSERT_TRUE(core::TakesRawPlanes(**backend));
  ASSERT_NE((*backend)->gpu(), nullptr);
  core::ExtractionParams p;
  p.specmin = 25;
  p.nspec = 50;
  p.wmin = 6000.0;
  p.wmax = 6100.0;
  auto g = core::Geometry::Create(LoadBundledPsf(), p, 4128, 4114, /*cache_spots=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  const core::PreprocImage frame = MakeSyntheticFrame(**g, SyntheticOptions{});
  core::PlaneBufferPool pinned_pool(int64_t{1} << 30);
  pinned_pool.set_pinner((*backend)->gpu()->PlanePinner());

  for (core::MaskPolicy policy : {core::MaskPolicy::kDesispec, core::MaskPolicy::kAnyBit}) {
    for (bool pinned : {true, false}) {
      const std::string what = absl::StrCat(
          policy == core::MaskPolicy::kAnyBit ? "any bit" : "desispec", pinned ? ", pinned" : ", pageable");
      core::PlaneBufferPool* pool = pinned ? &pinned_pool : nullptr;
      const core::PreprocImage raw = RawPlanes(frame, policy, pool);
      core::PreprocImage host = RawPlanes(frame, policy, nullptr);
      core::DecodeRawPlanes(&host);  // the host's rules
      ASSERT_TRUE(host.has_float32_planes());
      ASSERT_GT(host.n_masked, 10000u) << what;
      ASSERT_GT(host.n_nonfinite, 10000u) << what;

      auto device_ruled = Extract(**backend, *g, raw);
      ASSERT_TRUE(device_ruled.ok()) << what << ": " << device_ruled.status();
      auto host_ruled = Extract(**backend, *g, host);
      ASSERT_TRUE(host_ruled.ok()) << what << ": " << host_ruled.status();
      ASSERT_FALSE(device_ruled->bundles.empty());
      ExpectSameBundles(host_ruled->bundles, device_ruled->bundles, what);
      EXPECT_EQ(device_ruled->summary.pixels_masked, static_cast<int64_t>(host.n_masked)) << what;
      EXPECT_EQ(device_ruled->summary.pixels_nonfinite, static_cast<int64_t>(host.n_nonfinite)) << what;
      EXPECT_EQ(host_ruled->summary.pixels_masked, -1) << what << ": the host counted";
      // Raw planes leave the host nothing to stage.
      EXPECT_EQ(device_ruled->summary.stage_seconds["upload_host"], 0.0) << what;
    }
  }
}

TEST(CudaRawPlanes, WithoutMaskAndRefusedByTheCpuBackend) {
  absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
  ASSERT_TRUE(options.ok()) << options.status();
  core::ExtractionParams p;
  p.specmin = 0;
  p.nspec = 25;
  p.wmin = 6000.0;
  p.wmax = 6050.0;
  auto g = core::Geometry::Create(LoadBundledPsf(), p, 4128, 4114, /*cache_spots=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  const core::PreprocImage frame = MakeSyntheticFrame(**g, SyntheticOptions{});
  core::PreprocImage raw = RawPlanes(frame, core::MaskPolicy::kDesispec, nullptr);
  raw.mask_raw.Release();  // a preproc without MASK
  core::PreprocImage host = RawPlanes(frame, core::MaskPolicy::kDesispec, nullptr);
  host.mask_raw.Release();
  core::DecodeRawPlanes(&host);

  auto cpu = core::CreateBackend(core::BackendOptions{});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(core::TakesRawPlanes(**cpu));
  auto refused = Extract(**cpu, *g, raw);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();

  auto backend = core::CreateBackend(*options);
  if (!backend.ok()) GTEST_SKIP() << "CUDA backend unavailable: " << backend.status();
  auto device_ruled = Extract(**backend, *g, raw);
  ASSERT_TRUE(device_ruled.ok()) << device_ruled.status();
  auto host_ruled = Extract(**backend, *g, host);
  ASSERT_TRUE(host_ruled.ok()) << host_ruled.status();
  ExpectSameBundles(host_ruled->bundles, device_ruled->bundles, "no mask");
  EXPECT_EQ(device_ruled->summary.pixels_masked, static_cast<int64_t>(host.n_masked));
  EXPECT_EQ(device_ruled->summary.pixels_nonfinite, static_cast<int64_t>(host.n_nonfinite));
}

}  // namespace
}  // namespace spexd::testing
