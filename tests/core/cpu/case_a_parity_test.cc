// Case A (the reference data's caseA/): the CPU backend against gpu_specter's own outputs, for both
// compat settings, at the parity bar of extraction-spec "Decisions".
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/backend/extract_frame.h"
#include "core/io/fits_file.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

std::vector<double> ReadHdu(const std::string& path, const char* extname) {
  auto f = FitsFile::OpenRead(path);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return {};
  EXPECT_TRUE(f->MoveToHdu(extname).ok()) << path << " " << extname;
  auto v = f->ReadImage<double>();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<double>{};
}

// max |a-b| / max|b| per spectrum (rows of length nwave): the FLUX/IVAR metric of the bar.
double MaxErrOverSpectrumMax(const std::vector<double>& a, const std::vector<double>& b, int nwave) {
  double worst = 0;
  for (std::size_t r = 0; r * nwave < b.size(); ++r) {
    double scale = 0, diff = 0;
    for (int w = 0; w < nwave; ++w) {
      scale = std::max(scale, std::fabs(b[r * nwave + w]));
      diff = std::max(diff, std::fabs(a[r * nwave + w] - b[r * nwave + w]));
    }
    if (scale > 0) worst = std::max(worst, diff / scale);
  }
  return worst;
}

// Prints a measured error next to its bar, so that CI logs record the margins.
double Report(const char* what, double err, double bar) {
  std::printf("  %-36s %.3e (bar %.0e)\n", what, err, bar);
  return err;
}

double MaxAbsErr(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

double MaxRelErr(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    double d = std::fabs(a[i] - b[i]);
    if (d == 0) continue;
    worst = std::max(worst, d / std::max(std::fabs(b[i]), 1e-300));
  }
  return worst;
}

class CaseATest : public ::testing::Test {
 protected:
  struct Data {
    std::shared_ptr<const Psf> psf;
    PreprocImage image;
  };
  static void SetUpTestSuite() {
    const std::string preproc = testing::SharedDataPath("caseA/preproc.fits.gz");
    if (preproc.empty()) return;
    auto psf = Psf::Load(testing::BundledPsfPath());
    ASSERT_TRUE(psf.ok()) << psf.status();
    PreprocOptions opts;
    opts.mask_policy = MaskPolicy::kAnyBit;  // the references ran spex (README: MASK != 0)
    auto image = ReadPreproc(preproc, opts);
    ASSERT_TRUE(image.ok()) << image.status();
    data_ = new Data{std::make_shared<const Psf>(std::move(*psf)), std::move(*image)};
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }

  static Frame Extract(Compat compat, bool model, int threads = 2, TaskPool* pool = nullptr) {
    ExtractionParams p;
    p.wmin = 5760.0; p.wmax = 7620.0; p.dw = 0.8;
    p.specmin = 0; p.nspec = 50;
    p.compat = compat;
    p.want_model = model;
    auto geo = Geometry::Create(data_->psf, p, data_->image.height, data_->image.width);
    EXPECT_TRUE(geo.ok()) << geo.status();
    ExtractionJob job;
    job.geometry = *geo;
    job.image = &data_->image;
    job.psferr = EffectivePsfErr(p, *data_->psf);
    job.want_model = model;
    auto backend = CreateCpuBackend(threads, pool);
    auto frame = ExtractFrame(*backend, job);
    EXPECT_TRUE(frame.ok()) << frame.status();
    return frame.ok() ? std::move(*frame) : Frame{};
  }

  static Data* data_;
};
CaseATest::Data* CaseATest::data_ = nullptr;

#define SPEXD_REQUIRE_CASE_A()                                                             \
  SPEXD_REQUIRE_SHARED_DATA(case_a_preproc, "caseA/preproc.fits.gz");                      \
  ASSERT_NE(data_, nullptr)

TEST_F(CaseATest, CompatCpuMatchesGpuSpecterCpuPath) {
  SPEXD_REQUIRE_CASE_A();
  SPEXD_REQUIRE_SHARED_DATA(ref, "caseA/reference-cpu.fits.gz");
  SPEXD_REQUIRE_SHARED_DATA(model_ref, "caseA/model-cpu.fits.gz");
  Frame f = Extract(Compat::kCpu, /*model=*/true);
  ASSERT_EQ(f.nspec, 50);
  ASSERT_EQ(f.nwave, 2326);
  EXPECT_EQ(f.wave, ReadHdu(ref, "WAVELENGTH"));  // exact arange values (spec §2.3)
  // Tolerances: the parity bar of extraction-spec "Decisions" (same algorithm in float64;
  // gpu_specter's own two paths agree to 2e-13).
  EXPECT_LE(Report("FLUX / spectrum max", MaxErrOverSpectrumMax(f.flux, ReadHdu(ref, "FLUX"), f.nwave), 1e-10), 1e-10);
  EXPECT_LE(Report("IVAR / spectrum max", MaxErrOverSpectrumMax(f.ivar, ReadHdu(ref, "IVAR"), f.nwave), 1e-10), 1e-10);
  EXPECT_LE(Report("RESOLUTION abs", MaxAbsErr(f.rdiags, ReadHdu(ref, "RESOLUTION")), 1e-10), 1e-10);
  EXPECT_LE(Report("PIXMASK_FRACTION abs", MaxAbsErr(f.pixmask_fraction, ReadHdu(ref, "PIXMASK_FRACTION")), 1e-12), 1e-12);
  EXPECT_LE(Report("CHI2PIX rel", MaxRelErr(f.chi2pix, ReadHdu(ref, "CHI2PIX")), 1e-8), 1e-8);
  EXPECT_EQ(f.counts.failed, 0);
  EXPECT_EQ(f.counts.skipped, 0);
  // Model: the reference is stored as float32 (rounding <= 6e-5 e-, i.e. 6e-8 relative), so
  // 1e-6 relative per pixel, plus 1e-9 of the peak where positive and negative
  // R-convolved terms cancel.
  std::vector<double> mref = ReadHdu(model_ref, "MODEL");
  ASSERT_EQ(mref.size(), f.model.size());
  double peak = 0;
  for (double v : mref) peak = std::max(peak, std::fabs(v));
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < mref.size(); ++i) {
    double d = std::fabs(f.model[i] - mref[i]);
    worst = std::max(worst, d / (std::fabs(mref[i]) + 1e-3 * peak));
    if (d > 1e-6 * std::fabs(mref[i]) + 1e-9 * peak) ++bad;
  }
  Report("MODEL rel (floor 1e-3 peak)", worst, 1e-6);
  EXPECT_EQ(bad, 0u) << "worst relative model error " << worst;
}

TEST_F(CaseATest, CompatGpuMatchesGpuSpecterGpuPath) {
  SPEXD_REQUIRE_CASE_A();
  SPEXD_REQUIRE_SHARED_DATA(ref, "caseA/reference-gpu.fits.gz");
  SPEXD_REQUIRE_SHARED_DATA(ref_cpu, "caseA/reference-cpu.fits.gz");
  Frame f = Extract(Compat::kGpu, /*model=*/false);
  ASSERT_EQ(f.nspec, 50);
  EXPECT_LE(Report("FLUX / spectrum max", MaxErrOverSpectrumMax(f.flux, ReadHdu(ref, "FLUX"), f.nwave), 1e-10), 1e-10);
  EXPECT_LE(Report("IVAR / spectrum max", MaxErrOverSpectrumMax(f.ivar, ReadHdu(ref, "IVAR"), f.nwave), 1e-10), 1e-10);
  // The GPU file does not repeat RESOLUTION (equal to the CPU one to 5e-13, README).
  EXPECT_LE(Report("RESOLUTION abs", MaxAbsErr(f.rdiags, ReadHdu(ref_cpu, "RESOLUTION")), 1e-10), 1e-10);
  EXPECT_LE(Report("PIXMASK_FRACTION abs", MaxAbsErr(f.pixmask_fraction, ReadHdu(ref, "PIXMASK_FRACTION")), 1e-12), 1e-12);
  EXPECT_LE(Report("CHI2PIX rel", MaxRelErr(f.chi2pix, ReadHdu(ref, "CHI2PIX")), 1e-8), 1e-8);
}

// Against the truth: chi2/bin of (FLUX - R.truth) sqrt(IVAR) over good bins (ivar > 0,
// pixmask_fraction <= 0.5, 5 edge bins dropped per spectrum) is 1.0026 for gpu_specter;
// within 0.5 %.
TEST_F(CaseATest, ChiSquareAgainstTruth) {
  SPEXD_REQUIRE_CASE_A();
  SPEXD_REQUIRE_SHARED_DATA(truth_path, "caseA/truth.fits.gz");
  Frame f = Extract(Compat::kGpu, /*model=*/false);
  std::vector<double> truth = ReadHdu(truth_path, "FLUX");
  ASSERT_EQ(truth.size(), f.flux.size());
  const int nw = f.nwave, nd = f.ndiag, nk = 2 * nd + 1;
  double chi2 = 0;
  long n = 0;
  for (int s = 0; s < f.nspec; ++s) {
    for (int r = 5; r < nw - 5; ++r) {
      const std::size_t i = static_cast<std::size_t>(s) * nw + r;
      if (!(f.ivar[i] > 0) || f.pixmask_fraction[i] > 0.5) continue;
      // (R f)_r = sum_k R[r][c] f_c with R[c-nd+k][c] = Rdiags[k][c], c = r+nd-k.
      double rf = 0;
      for (int k = 0; k < nk; ++k) {
        int c = r + nd - k;
        if (c < 0 || c >= nw) continue;
        rf += f.rdiags[(static_cast<std::size_t>(s) * nk + k) * nw + c] * truth[static_cast<std::size_t>(s) * nw + c];
      }
      double chi = (f.flux[i] - rf) * std::sqrt(f.ivar[i]);
      chi2 += chi * chi;
      ++n;
    }
  }
  Report("chi2/bin vs truth", chi2 / static_cast<double>(n), 1.0026);
  EXPECT_EQ(n, 115794);
  EXPECT_NEAR(chi2 / static_cast<double>(n), 1.0026, 0.005 * 1.0026);
}

// Patches are computed independently: any thread count gives bit-identical results, on
// the backend's own pool or on an owner's (here smaller than asked: 1 + 2 workers of 4).
TEST_F(CaseATest, ThreadCountDoesNotChangeResults) {
  SPEXD_REQUIRE_CASE_A();
  Frame one = Extract(Compat::kGpu, true, 1);
  Frame three = Extract(Compat::kGpu, true, 3);
  TaskPool owners_pool;
  owners_pool.AddThreads(2);
  Frame shared = Extract(Compat::kGpu, true, 4, &owners_pool);
  for (const Frame* f : {&three, &shared}) {
    EXPECT_EQ(one.flux, f->flux);
    EXPECT_EQ(one.ivar, f->ivar);
    EXPECT_EQ(one.rdiags, f->rdiags);
    EXPECT_EQ(one.chi2pix, f->chi2pix);
    EXPECT_EQ(one.model, f->model);
  }
}

}  // namespace
}  // namespace spexd::core
