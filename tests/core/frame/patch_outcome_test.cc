// core::MarkPatchFailed: a failed patch's kept bins are zero in every output, its
// resolution too when the bundle holds it as the frame file's bytes (rdiags_file): the
// same bytes as the float64 resolution zeroed and narrowed, and their words' sum kept.
#include "core/frame/patch_outcome.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/base/float_convert.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

TEST(MarkPatchFailedTest, ResolutionAsFloat32BytesIsZeroedAsTheFloat64Is) {
  PatchPlan plan;
  plan.nper = 2;
  plan.bundlesize = 5;
  plan.ndiag = 3;
  const int nwave = 40, nk = 2 * plan.ndiag + 1;
  BundleResult doubles;
  doubles.Allocate(/*bundle_index=*/1, /*fiber0=*/5, plan.bundlesize, nwave, plan.ndiag);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (double& v : doubles.rdiags) v = normal(rng);
  BundleResult stream = doubles;  // a float32 stream's bytes
  stream.rdiags_f32 = PlaneBuffer<char>::Make(4 * stream.rdiags.size(), nullptr);
  NarrowToFloat32(stream.rdiags.data(), reinterpret_cast<float*>(stream.rdiags_f32.data()),
                  stream.rdiags.size());
  stream.rdiags.clear();
  BundleResult bytes = doubles;
  bytes.rdiags_file = PlaneBuffer<char>::Make(4 * bytes.rdiags.size(), nullptr);
  bytes.rdiags_file_word_sum =
      NarrowToBigEndianFloat32(bytes.rdiags.data(), bytes.rdiags.size(), bytes.rdiags_file.data());
  bytes.rdiags.clear();
  PatchDesc d{};
  d.bundle = 1;
  d.out_row = 1 * plan.bundlesize + 2;  // rows 2 and 3 of the bundle
  d.out_col = 11;
  d.nkeep = 9;
  MarkPatchFailed(plan, d, &doubles);
  MarkPatchFailed(plan, d, &bytes);
  MarkPatchFailed(plan, d, &stream);
  std::vector<char> want(4 * doubles.rdiags.size());
  NarrowToBigEndianFloat32(doubles.rdiags.data(), doubles.rdiags.size(), want.data());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), bytes.rdiags_file.begin(), bytes.rdiags_file.end()));
  EXPECT_TRUE(bytes.rdiags.empty());
  NarrowToFloat32(doubles.rdiags.data(), reinterpret_cast<float*>(want.data()), doubles.rdiags.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), stream.rdiags_f32.begin(), stream.rdiags_f32.end()));
  EXPECT_TRUE(stream.rdiags.empty() && stream.rdiags_file.empty());
  // The words' sum taken before stays the sum of the bytes (the file's DATASUM is built
  // from it).
  ASSERT_TRUE(bytes.rdiags_file_word_sum.has_value());
  EXPECT_EQ(*bytes.rdiags_file_word_sum,
            BigEndianWordSum(bytes.rdiags_file.data(), bytes.rdiags_file.size()));
  // The zeroed bins are there: row 2, diagonal 0, the patch's first kept column.
  EXPECT_EQ(doubles.rdiags[(2 * static_cast<std::size_t>(nk)) * nwave + 11], 0.0);
  EXPECT_EQ(doubles.failed_bins, bytes.failed_bins);
  EXPECT_EQ(bytes.failed_bins[2 * static_cast<std::size_t>(nwave) + 11], 1);
}

}  // namespace
}  // namespace spexd::core
