#include "server/proto_convert.h"

#include "gtest/gtest.h"

namespace spexd::server {
namespace {

TEST(ProtoConvertTest, UnsetFieldsTakeDesiExtractSpectraDefaults) {
  auto p = ParamsFromProto(v1::ExtractionParams(), false);
  ASSERT_TRUE(p.ok());
  const core::ExtractionParams d;
  EXPECT_FALSE(p->has_wavelength);  // PSF domain, dw 0.8
  EXPECT_EQ(p->nspec, d.nspec);
  EXPECT_EQ(p->bundlesize, d.bundlesize);
  EXPECT_EQ(p->nsubbundles, d.nsubbundles);
  EXPECT_EQ(p->nwavestep, d.nwavestep);
  EXPECT_EQ(p->wavepad, d.wavepad);
  EXPECT_EQ(p->wavepad_frac, d.wavepad_frac);
  EXPECT_EQ(p->pixpad_frac, d.pixpad_frac);
  EXPECT_FALSE(p->psferr.has_value());
  EXPECT_EQ(p->compat, core::Compat::kGpu);
  EXPECT_EQ(p->mask_policy, core::MaskPolicy::kDesispec);
}

TEST(ProtoConvertTest, ExplicitValuesAndWavelengthRule) {
  v1::ExtractionParams in;
  in.set_wmin(5760);
  in.set_wmax(7620);
  in.set_dw(0.8);
  in.set_nspec(0);  // passed through: validated against the PSF later
  in.set_psferr(0.04);
  in.set_compat(v1::COMPAT_CPU);
  in.set_mask_policy(v1::MASK_POLICY_ANY_BIT);
  auto p = ParamsFromProto(in, true);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->has_wavelength);
  EXPECT_EQ(p->wmax, 7620);
  EXPECT_EQ(p->nspec, 0);
  EXPECT_EQ(*p->psferr, 0.04);
  EXPECT_EQ(p->compat, core::Compat::kCpu);
  EXPECT_EQ(p->mask_policy, core::MaskPolicy::kAnyBit);
  EXPECT_TRUE(p->want_model);
  in.clear_dw();
  EXPECT_EQ(ParamsFromProto(in, false).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, SelectBundlesFromBundlesOrFibres) {
  core::PatchPlan plan;
  plan.specmin = 100;
  plan.nspec = 75;
  plan.bundlesize = 25;
  plan.nbundles = 3;
  v1::ExtractHeader h;
  EXPECT_TRUE(SelectBundles(h, plan)->empty());  // all
  h.add_fibers(174);
  h.add_fibers(100);
  h.add_fibers(101);
  EXPECT_EQ(*SelectBundles(h, plan), (std::vector<int>{0, 2}));
  h.add_fibers(175);
  EXPECT_FALSE(SelectBundles(h, plan).ok());
  h.clear_fibers();
  h.add_bundles(1);
  h.add_bundles(1);
  EXPECT_EQ(*SelectBundles(h, plan), (std::vector<int>{1}));
  h.add_fibers(100);
  EXPECT_FALSE(SelectBundles(h, plan).ok());  // both
  h.clear_fibers();
  h.add_bundles(3);
  EXPECT_FALSE(SelectBundles(h, plan).ok());
}

TEST(ProtoConvertTest, LargeBundlesAreSplitIntoPartsUnderTheLimit) {
  core::BundleResult b;
  b.Allocate(/*bundle=*/2, /*fiber0=*/50, /*nfib=*/25, /*nw=*/2326, /*nd=*/5);
  for (std::size_t i = 0; i < b.flux.size(); ++i) b.flux[i] = static_cast<double>(i);
  b.counts.extracted = 235;
  const std::size_t limit = (4 << 20) - 65536;
  auto parts = BundleToParts(b, 1.5, limit);
  ASSERT_GT(parts.size(), 1u);  // a full r-camera bundle is ~7 MB in float64
  int fibres = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const v1::BundleData& p = parts[i];
    EXPECT_LE(p.ByteSizeLong(), std::size_t{4} << 20);
    EXPECT_EQ(p.bundle(), 2);
    EXPECT_EQ(p.fiber_begin(), 50 + fibres);
    EXPECT_EQ(p.flux_size(), p.nfibers() * 2326);
    EXPECT_EQ(p.resolution_size(), p.nfibers() * 2326 * 11);
    EXPECT_EQ(p.flux(0), static_cast<double>(fibres * 2326));
    EXPECT_EQ(p.last_part(), i + 1 == parts.size());
    fibres += p.nfibers();
  }
  EXPECT_EQ(fibres, 25);
  EXPECT_EQ(parts.back().counts().extracted(), 235);
  EXPECT_EQ(parts.back().seconds(), 1.5);
  EXPECT_EQ(parts.front().counts().extracted(), 0);
}

}  // namespace
}  // namespace spexd::server
