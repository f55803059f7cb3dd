// Bad inputs to an extraction give a clear error or correctly flagged output, never a
// crash: mismatched PSF and image, grid off the PSF, nspec not a multiple of the
// bundle size, a fully masked image, NaN pixels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "core/cpu/cpu_backend.h"
#include "core/backend/extract_frame.h"
#include "core/io/psf.h"
#include "core/sim/simulator.h"
#include "core/frame/usable_data.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

class BadExtractionInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto psf = Psf::Load(testing::BundledPsfPath());
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_ = new std::shared_ptr<const Psf>(std::make_shared<const Psf>(std::move(*psf)));
    SimOptions sim;
    sim.nfibers = 25;
    sim.wmin = 6000.0; sim.wmax = 6080.0; sim.dw = 0.8;
    sim.seed = 3;
    auto spectra = GenerateSpectra(sim);
    ASSERT_TRUE(spectra.ok());
    auto frame = SimulateFrame(**psf_, *spectra, sim);
    ASSERT_TRUE(frame.ok());
    image_ = new PreprocImage;
    image_->height = frame->height;
    image_->width = frame->width;
    image_->image.assign(frame->image.begin(), frame->image.end());
    image_->ivar.assign(frame->ivar.begin(), frame->ivar.end());
  }
  static void TearDownTestSuite() {
    delete psf_;
    delete image_;
  }
  static ExtractionParams Params() {
    ExtractionParams p;
    p.wmin = 6000.0; p.wmax = 6080.0; p.dw = 0.8;
    p.nspec = 25;
    return p;
  }
  static absl::StatusOr<Frame> Run(const ExtractionParams& p, const PreprocImage& image) {
    auto geo = Geometry::Create(*psf_, p, image.height, image.width);
    if (!geo.ok()) return geo.status();
    ExtractionJob job;
    job.geometry = *geo;
    job.image = &image;
    job.want_model = p.want_model;
    auto backend = CreateCpuBackend(2);
    return ExtractFrame(*backend, job);
  }
  static std::shared_ptr<const Psf>* psf_;
  static PreprocImage* image_;
};
std::shared_ptr<const Psf>* BadExtractionInputTest::psf_ = nullptr;
PreprocImage* BadExtractionInputTest::image_ = nullptr;

TEST_F(BadExtractionInputTest, ImageAndPsfDoNotMatch) {
  // Larger than the CCD the PSF was fitted on.
  PreprocImage big;
  big.height = 4200;
  big.width = 4200;
  big.image.assign(4200 * 4200, 0.0);
  big.ivar.assign(4200 * 4200, 1.0);
  auto f = Run(Params(), big);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("fitted on a 4128 x 4114 CCD"), std::string::npos)
      << f.status();
  // A small image on which none of the requested traces fall.
  PreprocImage small;
  small.height = 300;
  small.width = 100;
  small.image.assign(300 * 100, 0.0);
  small.ivar.assign(300 * 100, 1.0);
  auto g = Run(Params(), small);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("off this image"), std::string::npos) << g.status();
}

TEST_F(BadExtractionInputTest, GridOutsideThePsfDomain) {
  ExtractionParams p = Params();
  p.wmin = 8000; p.wmax = 9000;
  auto f = Run(p, *image_);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("beyond the PSF domain"), std::string::npos);
}

TEST_F(BadExtractionInputTest, NspecNotMultipleOfBundleSize) {
  ExtractionParams p = Params();
  p.nspec = 30;
  auto f = Run(p, *image_);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a multiple of bundlesize"), std::string::npos);
}

// An image without a single valid pixel (all NaN, or fully masked) is refused before any
// work instead of "extracting" zeros with a tiny ivar.
TEST_F(BadExtractionInputTest, FullyMaskedImageIsRefused) {
  PreprocImage masked = *image_;
  std::fill(masked.ivar.begin(), masked.ivar.end(), 0.0);
  auto f = Run(Params(), masked);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  EXPECT_NE(f.status().message().find("no valid pixel"), std::string::npos) << f.status();
}

// What the backends make of a region without valid pixels (gpu_specter's weak zero-flux
// prior, spec §2.8): zero flux, pixmask_fraction 1, and no usable bin, so that a request
// made only of such bins ends with FAILED_PRECONDITION.
TEST_F(BadExtractionInputTest, FullyMaskedRegionGivesNoUsableBin) {
  PreprocImage masked = *image_;
  std::fill(masked.ivar.begin(), masked.ivar.end(), 0.0);
  for (Compat compat : {Compat::kGpu, Compat::kCpu}) {
    ExtractionParams p = Params();
    p.compat = compat;
    auto geo = Geometry::Create(*psf_, p, masked.height, masked.width);
    ASSERT_TRUE(geo.ok());
    ExtractionJob job;
    job.geometry = *geo;
    job.image = &masked;
    int64_t usable = 0;
    auto summary = CreateCpuBackend(2)->Extract(job, [&](BundleResult&& b) {
      for (std::size_t i = 0; i < b.flux.size(); ++i) {
        EXPECT_TRUE(std::isfinite(b.flux[i]) && std::isfinite(b.ivar[i]));
        EXPECT_EQ(b.flux[i], 0.0);
        EXPECT_NEAR(b.pixmask_fraction[i], 1.0, 1e-12);  // a normalised stamp, summed
      }
      usable += CountUsableBins(b);
      return absl::OkStatus();
    });
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(usable, 0);
    EXPECT_EQ(CheckUsableResult(usable, summary->counts).code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

// Dead fibres in a live frame are normal (desispec: ALLBADPIX, ivar ~0): still OK.
TEST_F(BadExtractionInputTest, DeadFibresInALiveFrameStayOk) {
  PreprocImage dead = *image_;
  // Columns left of the midpoint between fibres 4 and 5: fibres 0-4 see no valid pixel.
  const double xcut = 0.5 * ((*psf_)->X(4, 6040.0) + (*psf_)->X(5, 6040.0));
  for (int y = 0; y < dead.height; ++y) {
    for (int x = 0; x < dead.width && x < xcut; ++x) dead.ivar[static_cast<std::size_t>(y) * dead.width + x] = 0;
  }
  auto f = Run(Params(), dead);
  ASSERT_TRUE(f.ok()) << f.status();
  int all_bad = 0, clean = 0;
  for (std::size_t i = 0; i < f->flux.size(); ++i) {
    all_bad += (f->mask[i] & kAllBadPix) != 0;
    clean += (f->mask[i] & (kSomeBadPix | kAllBadPix)) == 0;
  }
  EXPECT_GT(all_bad, 0);
  EXPECT_GT(clean, 0);
}

// NaN pixels that reach a backend with ivar > 0 (bypassing the reader's rule) make their
// patches fail even after the retry: outputs zero and BAD2DFIT, counted, no crash.
TEST_F(BadExtractionInputTest, NanPixelsFlagThePatchInsteadOfCrashing) {
  PreprocImage nan = *image_;
  const auto& geo = Geometry::Create(*psf_, Params(), nan.height, nan.width);
  ASSERT_TRUE(geo.ok());
  const PatchDesc& d = (*geo)->plan().patches[0];
  const std::size_t pix = static_cast<std::size_t>(d.y0 + d.ny / 2) * nan.width + d.x0 + d.nx / 2;
  nan.image[pix] = std::numeric_limits<double>::quiet_NaN();
  auto f = Run(Params(), nan);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GE(f->counts.failed, 1);
  EXPECT_GE(f->counts.retried, 0);
  bool flagged = false;
  for (std::size_t i = 0; i < f->flux.size(); ++i) {
    ASSERT_TRUE(std::isfinite(f->flux[i]));
    if (f->mask[i] & kBad2DFit) flagged = true;
  }
  EXPECT_TRUE(flagged);
  // The reader's non-finite rule (spec "Decisions") turns the same pixel into ivar = 0,
  // and then the patch extracts normally.
  std::vector<uint16_t> mask(nan.image.size(), 0);
  ApplyPixelRules(mask.data(), MaskPolicy::kDesispec, &nan);
  auto g = Run(Params(), nan);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->counts.failed, 0);
}

// The CPU backend takes float32 planes as preproc files store them (no widened copy on
// the host): every output equals that of the widened planes bit for bit, NaN pixels and
// zero weights included (widening is exact; each patch gathers its window as float64).
TEST_F(BadExtractionInputTest, Float32PlanesGiveTheFrameOfTheirWidenedPlanes) {
  PreprocImage narrow;
  narrow.height = image_->height;
  narrow.width = image_->width;
  const std::size_t n = image_->image.size();
  narrow.image32 = PlaneBuffer<float>::Make(n, nullptr);
  narrow.ivar32 = PlaneBuffer<float>::Make(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    narrow.image32[i] = static_cast<float>(image_->image[i]);
    narrow.ivar32[i] = static_cast<float>(image_->ivar[i]);
  }
  // NaN pixels with weight 0 (as the pixel rules leave them) around the brightest pixel,
  // which lies on a trace inside the extracted range.
  const std::size_t peak = static_cast<std::size_t>(
      std::max_element(image_->image.begin(), image_->image.end()) - image_->image.begin());
  const std::size_t width = static_cast<std::size_t>(narrow.width);
  for (std::size_t dy = 0; dy < 3; ++dy) {
    for (std::size_t dx = 0; dx < 3; ++dx) {
      const std::size_t i = peak - width - 1 + dy * width + dx;  // the 3x3 block around it
      narrow.image32[i] = std::numeric_limits<float>::quiet_NaN();
      narrow.ivar32[i] = 0.0f;
    }
  }
  PreprocImage wide = narrow;
  WidenPlanes(&wide);
  ASSERT_FALSE(wide.has_float32_planes());
  ASSERT_TRUE(narrow.has_float32_planes());
  ASSERT_TRUE(TakesFloat32Planes(*CreateCpuBackend(1)));
  ExtractionParams p = Params();
  p.want_model = true;
  auto a = Run(p, narrow);
  auto b = Run(p, wide);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  auto same = [](const auto& x, const auto& y, const char* what) {
    ASSERT_EQ(x.size(), y.size()) << what;
    ASSERT_FALSE(x.empty()) << what;
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])), 0) << what;
  };
  same(a->flux, b->flux, "flux");
  same(a->ivar, b->ivar, "ivar");
  same(a->rdiags, b->rdiags, "rdiags");
  same(a->pixmask_fraction, b->pixmask_fraction, "pixmask_fraction");
  same(a->chi2pix, b->chi2pix, "chi2pix");
  same(a->mask, b->mask, "mask");
  same(a->model, b->model, "model");
  // The NaN pixels reached the extraction: some bins lost weight there.
  EXPECT_TRUE(std::any_of(a->pixmask_fraction.begin(), a->pixmask_fraction.end(),
                          [](double f) { return f > 0; }));
}

}  // namespace
}  // namespace spexd::core
