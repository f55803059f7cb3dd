#include "core/frame/frame.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "core/base/parallel_for.h"
#include "core/frame/health_summary.h"
#include "core/io/psf.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

// ALLBADPIX: spexd's >= 1 - 1e-12 by default; desispec's == 1.0 under kDesispecExact
// (a fully masked bin whose stamp sums to 1 - 1e-13 is flagged only by spexd's rule).
TEST(SpecMaskTest, AllBadPixRules) {
  Frame f;
  f.nspec = 1;
  f.nwave = 3;
  f.chi2pix = {1, 1, 1};
  f.pixmask_fraction = {1.0, 1.0 - 1e-13, 0.6};
  ComputeSpecMask(&f);
  EXPECT_EQ(f.mask, (std::vector<uint32_t>{kSomeBadPix | kAllBadPix, kSomeBadPix | kAllBadPix,
                                           kSomeBadPix}));
  ComputeSpecMask(&f, MaskPolicy::kDesispecExact);
  EXPECT_EQ(f.mask, (std::vector<uint32_t>{kSomeBadPix | kAllBadPix, kSomeBadPix, kSomeBadPix}));
  ComputeSpecMask(&f, MaskPolicy::kAnyBit);
  EXPECT_EQ(f.mask[1], kSomeBadPix | kAllBadPix);
}

// The specmask computed the plain way (one thread, a strided gather per
// wavelength): the reference the blocked, pooled ComputeSpecMask must equal bit for bit.
std::vector<uint32_t> ReferenceMask(const Frame& f, MaskPolicy policy) {
  const double all_bad = policy == MaskPolicy::kDesispecExact ? 1.0 : 1.0 - 1e-12;
  const int ns = f.nspec, nw = f.nwave;
  std::vector<uint32_t> mask(static_cast<std::size_t>(ns) * nw, 0);
  std::vector<double> med_wave(nw), med_fiber(ns), tmp;
  for (int w = 0; w < nw; ++w) {
    tmp.clear();
    for (int s = 0; s < ns; ++s) tmp.push_back(f.chi2pix[static_cast<std::size_t>(s) * nw + w]);
    med_wave[w] = Median(tmp);
  }
  for (int s = 0; s < ns; ++s) {
    auto begin = f.chi2pix.begin() + static_cast<std::ptrdiff_t>(s) * nw;
    med_fiber[s] = Median(std::vector<double>(begin, begin + nw));
  }
  for (int s = 0; s < ns; ++s) {
    for (int w = 0; w < nw; ++w) {
      const std::size_t i = static_cast<std::size_t>(s) * nw + w;
      uint32_t m = 0;
      if (f.pixmask_fraction[i] > 0.5) m |= kSomeBadPix;
      if (f.pixmask_fraction[i] >= all_bad) m |= kAllBadPix;
      if (f.chi2pix[i] > 5 * med_wave[w] && f.chi2pix[i] > 5 * med_fiber[s]) m |= kBad2DFit;
      if (!f.failed_bins.empty() && f.failed_bins[i]) m |= kBad2DFit;
      mask[i] = m;
    }
  }
  return mask;
}

// chi2pix with outliers, ties, NaN and infinities; pixmask fractions around the rules.
Frame RandomFrame(int ns, int nw, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Frame f;
  f.nspec = ns;
  f.nwave = nw;
  const std::size_t n = static_cast<std::size_t>(ns) * nw;
  f.chi2pix.resize(n);
  f.pixmask_fraction.resize(n);
  f.failed_bins.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double r = u(rng);
    f.chi2pix[i] = r < 0.01   ? 50 + 100 * u(rng)
                   : r < 0.02 ? 1.0
                   : r < 0.025 ? std::numeric_limits<double>::quiet_NaN()
                   : r < 0.027 ? std::numeric_limits<double>::infinity()
                               : u(rng);
    const double p = u(rng);
    f.pixmask_fraction[i] = p < 0.05 ? 1.0 : p < 0.1 ? 1.0 - 1e-13 : p;
    f.failed_bins[i] = u(rng) < 0.01;
  }
  return f;
}

// Fibre medians given (as FrameAssembler computes them bundle by bundle) give the mask
// computed from scratch; given with the wrong length they are not used.
TEST(SpecMaskTest, GivenFiberMediansGiveTheSameMask) {
  Frame f = RandomFrame(137, 301, 11);
  const std::vector<uint32_t> expected = ReferenceMask(f, MaskPolicy::kDesispec);
  std::vector<double> medians;
  for (int s = 0; s < f.nspec; ++s) {
    const auto row = f.chi2pix.begin() + static_cast<std::ptrdiff_t>(s) * f.nwave;
    medians.push_back(Median(std::vector<double>(row, row + f.nwave)));
  }
  Frame given = f;
  ComputeSpecMask(&given, MaskPolicy::kDesispec, nullptr, &medians);
  EXPECT_EQ(given.mask, expected);
  // Medians that would flag nothing, but of the wrong length: computed afresh.
  const std::vector<double> wrong(static_cast<std::size_t>(f.nspec) - 1, 1e300);
  ComputeSpecMask(&f, MaskPolicy::kDesispec, nullptr, &wrong);
  EXPECT_EQ(f.mask, expected);
  // The right length is used as given: infinite medians flag no bin by the chi2pix rule.
  const std::vector<double> huge(static_cast<std::size_t>(f.nspec),
                                 std::numeric_limits<double>::infinity());
  ComputeSpecMask(&f, MaskPolicy::kDesispec, nullptr, &huge);
  int bad2d_expected = 0, bad2d = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    bad2d_expected += (expected[i] & kBad2DFit) != 0 && f.failed_bins[i] == 0;
    bad2d += (f.mask[i] & kBad2DFit) != 0 && f.failed_bins[i] == 0;
  }
  EXPECT_GT(bad2d_expected, 0);
  EXPECT_EQ(bad2d, 0);
}

// FinalizeBundle selects each fibre's chi2pix median once, bit for bit Median() of its
// row; the assembler and the health summary take those instead of selecting them again
// (a bundle whose medians would flag nothing then flags nothing by the chi2pix rule).
TEST(SpecMaskTest, FinalizedBundlesCarryTheirFiberMediansToTheMask) {
  auto geo = testing::SmallBundledGeometry();
  ASSERT_TRUE(geo.ok()) << geo.status();
  const PatchPlan& plan = (*geo)->plan();
  const std::vector<double> dwave(static_cast<std::size_t>(plan.nwave), 0.5);
  FrameAssembler finalized(**geo, false, FrameAssembler::Keep::kMaskInputs);
  FrameAssembler overridden(**geo, false, FrameAssembler::Keep::kMaskInputs);
  HealthAccumulator health(/*keep_chi2pix=*/true);
  Frame reference;
  for (int b = 0; b < plan.nbundles; ++b) {
    const Frame values = RandomFrame(plan.bundlesize, plan.nwave, static_cast<unsigned>(b + 3));
    BundleResult r;
    r.Allocate(b, plan.bundle_fiber_begin(b), plan.bundlesize, plan.nwave, plan.ndiag);
    r.chi2pix = values.chi2pix;
    r.pixmask_fraction = values.pixmask_fraction;
    r.failed_bins = values.failed_bins;
    FinalizeBundle(dwave, &r);
    ASSERT_EQ(r.fiber_chi2pix_median.size(), static_cast<std::size_t>(plan.bundlesize));
    for (int f = 0; f < plan.bundlesize; ++f) {
      const auto row = values.chi2pix.begin() + static_cast<std::ptrdiff_t>(f) * plan.nwave;
      const double expected = Median(std::vector<double>(row, row + plan.nwave));
      EXPECT_EQ(std::memcmp(&r.fiber_chi2pix_median[static_cast<std::size_t>(f)], &expected, 8), 0);
    }
    ASSERT_TRUE(finalized.Add(r).ok());
    health.Add(r);
    r.fiber_chi2pix_median.assign(r.fiber_chi2pix_median.size(),
                                  std::numeric_limits<double>::infinity());
    ASSERT_TRUE(overridden.Add(r).ok());
    reference.nspec += values.nspec;
    reference.nwave = values.nwave;
    for (auto* v : {&reference.chi2pix, &reference.pixmask_fraction}) {
      const auto& src = v == &reference.chi2pix ? values.chi2pix : values.pixmask_fraction;
      v->insert(v->end(), src.begin(), src.end());
    }
    reference.failed_bins.insert(reference.failed_bins.end(), values.failed_bins.begin(),
                                 values.failed_bins.end());
  }
  const std::vector<uint32_t> expected = ReferenceMask(reference, MaskPolicy::kDesispec);
  const Frame masked = finalized.Finish(MaskPolicy::kDesispec);
  EXPECT_EQ(masked.mask, expected);
  FrameHealth counted;
  CountMaskBits(masked, &counted);
  EXPECT_EQ(health.Finish(nullptr).bad2dfit, counted.bad2dfit);
  const Frame none = overridden.Finish(MaskPolicy::kDesispec);
  int bad2d_expected = 0, bad2d = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    bad2d_expected += (expected[i] & kBad2DFit) != 0 && reference.failed_bins[i] == 0;
    bad2d += (none.mask[i] & kBad2DFit) != 0 && reference.failed_bins[i] == 0;
  }
  EXPECT_GT(bad2d_expected, 0);
  EXPECT_EQ(bad2d, 0);
}

TEST(SpecMaskTest, BlockedAndPooledEqualsTheSerialReference) {
  auto pool = MakeTaskPool(3);
  // Sizes below, at and above the blocks (64 wavelengths, 25 fibres), odd and even.
  for (const auto& [ns, nw] : std::vector<std::pair<int, int>>{{1, 1}, {25, 64}, {26, 65}, {137, 301}, {500, 130}}) {
    for (MaskPolicy policy : {MaskPolicy::kDesispec, MaskPolicy::kDesispecExact}) {
      Frame f = RandomFrame(ns, nw, static_cast<unsigned>(ns * 1000 + nw));
      const std::vector<uint32_t> expected = ReferenceMask(f, policy);
      Frame serial = f;
      ComputeSpecMask(&serial, policy);
      EXPECT_EQ(serial.mask, expected) << ns << " x " << nw;
      ComputeSpecMask(&f, policy, pool.get());
      EXPECT_EQ(f.mask, expected) << ns << " x " << nw << " on the pool";
      int bad2d = 0;
      for (uint32_t m : expected) bad2d += (m & kBad2DFit) != 0;
      if (ns * nw > 1000) {
        EXPECT_GT(bad2d, 0) << "the outliers must be flagged";
      }
    }
  }
}

// A CUDA output region assembles only what the specmask needs: the same
// mask, chi2pix and pixmask_fraction as the whole frame, no flux, ivar or resolution.
TEST(SpecMaskTest, MaskInputsAssemblyGivesTheWholeFramesMask) {
  auto geo = testing::SmallBundledGeometry();
  ASSERT_TRUE(geo.ok()) << geo.status();
  const PatchPlan& plan = (*geo)->plan();
  FrameAssembler all(**geo, false), mask_only(**geo, false, FrameAssembler::Keep::kMaskInputs);
  FrameAssembler spectra(**geo, false, FrameAssembler::Keep::kSpectra);
  for (int b = 0; b < plan.nbundles; ++b) {
    Frame values = RandomFrame(plan.bundlesize, plan.nwave, static_cast<unsigned>(b + 7));
    BundleResult r;
    r.Allocate(b, plan.bundle_fiber_begin(b), plan.bundlesize, plan.nwave, plan.ndiag);
    r.chi2pix = values.chi2pix;
    r.pixmask_fraction = values.pixmask_fraction;
    r.failed_bins = values.failed_bins;
    for (double& v : r.flux) v = 1.5;
    for (std::size_t i = 0; i < r.ivar.size(); ++i) r.ivar[i] = 0.25 * static_cast<double>(i % 7);
    for (double& v : r.rdiags) v = 0.125;
    r.per_angstrom = true;
    ASSERT_TRUE(all.Add(r).ok());
    ASSERT_TRUE(mask_only.Add(r).ok());
    ASSERT_TRUE(spectra.Add(r).ok());
  }
  auto pool = MakeTaskPool(2);
  const Frame whole = all.Finish(MaskPolicy::kDesispecExact);
  const Frame masked = mask_only.Finish(MaskPolicy::kDesispecExact, pool.get());
  EXPECT_EQ(whole.nspec, 50);
  EXPECT_EQ(masked.nspec, whole.nspec);
  EXPECT_EQ(masked.mask, whole.mask);
  EXPECT_EQ(masked.mask, ReferenceMask(whole, MaskPolicy::kDesispecExact));
  EXPECT_EQ(std::memcmp(masked.chi2pix.data(), whole.chi2pix.data(), whole.chi2pix.size() * 8), 0);
  EXPECT_EQ(masked.pixmask_fraction, whole.pixmask_fraction);
  EXPECT_EQ(whole.flux.size(), static_cast<std::size_t>(50) * plan.nwave);
  EXPECT_TRUE(masked.flux.empty());
  EXPECT_TRUE(masked.ivar.empty());
  EXPECT_TRUE(masked.rdiags.empty());
  // A float32 stream's frame (kSpectra): the whole frame's spectra and mask, no resolution.
  const Frame no_res = spectra.Finish(MaskPolicy::kDesispecExact, pool.get());
  EXPECT_EQ(no_res.mask, whole.mask);
  EXPECT_EQ(no_res.flux, whole.flux);
  EXPECT_EQ(no_res.ivar, whole.ivar);
  EXPECT_EQ(std::memcmp(no_res.chi2pix.data(), whole.chi2pix.data(), whole.chi2pix.size() * 8), 0);  // NaN too
  EXPECT_EQ(whole.rdiags.size(), static_cast<std::size_t>(50) * plan.nwave * (2 * plan.ndiag + 1));
  EXPECT_TRUE(no_res.rdiags.empty());
}

}  // namespace
}  // namespace spexd::core
