#include "core/sim/simulator.h"

#include <fitsio.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/io/fits_file.h"
#include "core/io/preproc.h"
#include "core/plan/spots.h"
#include "core/base/task_pool.h"
#include "gtest/gtest.h"
#include "tests/bundled_psf_test.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using testing::ReadBytes;

namespace fs = std::filesystem;

// Small frames: 6 fibres on a 126-bin grid (the CCD is still the PSF's full 4128 x 4114).
SimOptions SmallOptions(uint64_t seed, SimNoise noise) {
  SimOptions o;
  o.fiber_begin = 20;
  o.nfibers = 6;
  o.wmin = 6000.0;
  o.wmax = 6100.0;
  o.dw = 0.8;
  o.seed = seed;
  o.noise = noise;
  o.read_noise = {2.9, 3.1, 3.0, 3.2};
  return o;
}

class SimulatorTest : public testing::BundledPsfTest {
 protected:
  std::string dir_ = testing::MakeTempDir();
};

// The noiseless image is the projection model itself: its sum is the projected photons
// (every stamp here lies fully on the CCD), and IVAR = 1/(model + rn²).
TEST_F(SimulatorTest, NoiselessFrameConservesPhotons) {
  const SimOptions o = SmallOptions(7, SimNoise::kNone);
  auto spectra = GenerateSpectra(o);
  ASSERT_TRUE(spectra.ok()) << spectra.status();
  ASSERT_EQ(spectra->wave.size(), 126u);
  EXPECT_EQ(spectra->flux, spectra->fine_flux);  // oversample 1: truth = the samples
  double expected = 0;
  for (std::size_t q = 0; q < spectra->fine_flux.size(); ++q) {
    expected += spectra->fine_flux[q] * spectra->dwave[q % spectra->wave.size()];
  }
  auto frame = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  ASSERT_EQ(frame->height, 4128);
  ASSERT_EQ(frame->width, 4114);
  EXPECT_NEAR(frame->photons_in, expected, 1e-12 * expected);
  double sum = 0;
  for (double v : frame->model) sum += v;
  EXPECT_NEAR(sum, expected, 1e-12 * expected);
  EXPECT_NEAR(frame->photons_on_ccd, expected, 1e-12 * expected);
  // Realistic brightness: ~1e5-1e7 photons per fibre, bright pixels in the thousands.
  const double peak = *std::max_element(frame->model.begin(), frame->model.end());
  EXPECT_GT(peak, 100.0);
  EXPECT_LT(peak, 1e5);
  for (std::size_t p = 0; p < frame->model.size(); p += 997) {
    EXPECT_EQ(frame->image[p], static_cast<float>(frame->model[p]));
    const int y = static_cast<int>(p / 4114), x = static_cast<int>(p % 4114);
    const double rn = o.read_noise[(y >= 2064 ? 2 : 0) + (x >= 2057 ? 1 : 0)];
    EXPECT_EQ(frame->ivar[p], static_cast<float>(1.0 / (frame->model[p] + rn * rn)));
  }
}

// One bin of one fibre: the image is exactly photons x the stamp at its corner.
TEST_F(SimulatorTest, SingleBinDepositsTheSpot) {
  SimOptions o = SmallOptions(1, SimNoise::kNone);
  auto spectra = MakeSimSpectra(o);
  ASSERT_TRUE(spectra.ok()) << spectra.status();
  const std::size_t nw = spectra->wave.size(), bin = 40, fib = 3;
  spectra->fine_flux[fib * nw + bin] = 1000.0;
  FillTruthFlux(&*spectra);
  auto frame = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  std::vector<double> stamp(11 * 17);
  int32_t xc = 0, yc = 0;
  EvaluateSpot(*psf_, 23, spectra->wave[bin], stamp.data(), &xc, &yc);
  const double photons = 1000.0 * spectra->dwave[bin];
  double inside = 0;
  for (int iy = 0; iy < 11; ++iy) {
    for (int ix = 0; ix < 17; ++ix) {
      const double v = frame->model[static_cast<std::size_t>(yc + iy) * 4114 + (xc + ix)];
      EXPECT_EQ(v, photons * stamp[static_cast<std::size_t>(iy * 17 + ix)]);
      inside += v;
    }
  }
  EXPECT_NEAR(inside, frame->photons_on_ccd, 1e-12 * photons);
}

TEST_F(SimulatorTest, OversampledTruthIsTheBinAverage) {
  SimOptions o = SmallOptions(5, SimNoise::kNone);
  o.oversample = 4;
  auto spectra = GenerateSpectra(o);
  ASSERT_TRUE(spectra.ok()) << spectra.status();
  const std::size_t nw = spectra->wave.size();
  ASSERT_EQ(spectra->fine_wave.size(), 4 * nw);
  EXPECT_NEAR(spectra->fine_wave[4 * 10 + 1], spectra->wave[10] - 0.125 * spectra->dwave[10],
              1e-9);
  double mean = 0;
  for (int k = 0; k < 4; ++k) mean += spectra->fine_flux[nw * 4 * 2 + 4 * 10 + k];
  EXPECT_NEAR(spectra->flux[nw * 2 + 10], mean / 4, 1e-12 * mean);
  auto frame = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  double truth_photons = 0;
  for (std::size_t q = 0; q < spectra->flux.size(); ++q) {
    truth_photons += spectra->flux[q] * spectra->dwave[q % nw];
  }
  EXPECT_NEAR(frame->photons_on_ccd, truth_photons, 1e-12 * truth_photons);
}

// Poisson + read noise: (image - model)² · ivar averages to 1, in the dark (read noise
// only) and in bright pixels (Poisson dominated); and the files are byte-identical for
// the same seed whatever the thread count.
TEST_F(SimulatorTest, PoissonFrameIsDeterministicAndCalibrated) {
  SimOptions o = SmallOptions(11, SimNoise::kPoisson);
  o.num_hot_pixels = 3;
  o.num_threads = 1;
  auto spectra = GenerateSpectra(o);
  ASSERT_TRUE(spectra.ok());
  auto frame = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  double dark_chi2 = 0, dark_mean = 0, bright_chi2 = 0;
  double ndark = 0, nbright = 0;
  for (std::size_t p = 0; p < frame->model.size(); ++p) {
    if (frame->mask[p] != 0) continue;
    const double d = frame->image[p] - frame->model[p];
    if (frame->model[p] == 0.0) {
      dark_chi2 += d * d * frame->ivar[p];
      dark_mean += d;
      ++ndark;
    } else if (frame->model[p] > 200.0) {
      bright_chi2 += d * d * frame->ivar[p];
      ++nbright;
    }
  }
  ASSERT_GT(ndark, 1e7);
  ASSERT_GT(nbright, 1000.0);
  RecordProperty("dark_chi2", absl::StrFormat("%.5f", dark_chi2 / ndark));
  RecordProperty("bright_chi2", absl::StrFormat("%.5f", bright_chi2 / nbright));
  RecordProperty("nbright", absl::StrFormat("%.0f", nbright));
  EXPECT_NEAR(dark_chi2 / ndark, 1.0, 0.002);
  EXPECT_NEAR(dark_mean / ndark, 0.0, 0.01);
  EXPECT_NEAR(bright_chi2 / nbright, 1.0, 0.1);
  ASSERT_EQ(frame->defects.size(), 3u);
  for (const SimDefect& d : frame->defects) {
    EXPECT_EQ(frame->mask[static_cast<std::size_t>(d.y) * 4114 + d.x], 2);
  }

  const std::string a = dir_ + "/a.fits", b = dir_ + "/b.fits";
  ASSERT_TRUE(WritePreproc(a, *psf_, *spectra, *frame, o).ok());
  o.num_threads = 3;
  auto again = SimulateFrame(*psf_, *GenerateSpectra(o), o);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(WritePreproc(b, *psf_, *spectra, *again, o).ok());
  EXPECT_TRUE(ReadBytes(a) == ReadBytes(b)) << "same seed, different thread count";
  TaskPool owners_pool;  // the owner's pool instead of one for the call
  owners_pool.AddThreads(2);
  o.pool = &owners_pool;
  auto on_pool = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(on_pool.ok());
  EXPECT_TRUE(on_pool->image == again->image && on_pool->ivar == again->ivar);
  o.pool = nullptr;
  EXPECT_FALSE(fs::exists(a + ".tmp-" + std::to_string(getpid())));

  SimOptions other = o;
  other.seed = 12;
  auto spectra2 = GenerateSpectra(other);
  ASSERT_TRUE(spectra2.ok());
  EXPECT_NE(spectra2->flux, spectra->flux);
  auto frame2 = SimulateFrame(*psf_, *spectra2, other);
  ASSERT_TRUE(frame2.ok());
  EXPECT_NE(frame2->image, frame->image);

  // The preproc file reads back through the project's reader.
  auto pre = ReadPreproc(a, {.mask_policy = MaskPolicy::kDesispec, .require_fibermap = true});
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_EQ(pre->height, 4128);
  EXPECT_EQ(pre->width, 4114);
  EXPECT_EQ(pre->n_masked, 3u);
  const std::size_t p = static_cast<std::size_t>(2500) * 4114 + 300;
  EXPECT_EQ(pre->image[p], static_cast<double>(frame->image[p]));
  // desispec.io.read_image needs a READNOISE HDU (or an RDNOISE key): per-pixel read
  // noise of the amplifier quadrants, HDU order IMAGE IVAR MASK READNOISE FIBERMAP.
  auto file = FitsFile::OpenRead(a);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(file->MoveToHduIndex(3).ok());
  EXPECT_EQ(*file->ReadString("EXTNAME"), "READNOISE");
  auto rn = file->ReadImage<float>();
  ASSERT_TRUE(rn.ok());
  EXPECT_EQ((*rn)[0], 2.9f);                                      // A: low y, low x
  EXPECT_EQ((*rn)[static_cast<std::size_t>(4127) * 4114 + 4113], 3.2f);  // D
  EXPECT_EQ((*rn)[static_cast<std::size_t>(100) * 4114 + 3000], 3.1f);   // B
  ASSERT_TRUE(file->MoveToHduIndex(4).ok());
  EXPECT_EQ(*file->ReadString("EXTNAME"), "FIBERMAP");
}

TEST_F(SimulatorTest, TruthRoundTripsAsInput) {
  const SimOptions o = SmallOptions(21, SimNoise::kNone);
  auto spectra = GenerateSpectra(o);
  ASSERT_TRUE(spectra.ok());
  auto frame = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(frame.ok());
  const std::string truth = dir_ + "/truth.fits";
  ASSERT_TRUE(WriteTruth(truth, *spectra, *frame, o).ok());
  auto back = ReadSpectra(truth, o);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->fine_flux, spectra->fine_flux);  // grid points interpolate exactly
  EXPECT_EQ(back->objtype, spectra->objtype);

  SimOptions wrong = o;
  wrong.nfibers = 5;
  auto bad = ReadSpectra(truth, wrong);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("expected FLUX [5][126]"), std::string::npos)
      << bad.status();
  wrong = o;
  wrong.fiber_begin = 21;
  EXPECT_NE(ReadSpectra(truth, wrong).status().message().find("SPECMIN"), std::string::npos);
  EXPECT_FALSE(ReadSpectra(dir_ + "/absent.fits", o).ok());
}

TEST_F(SimulatorTest, BadOptionsAreInvalidArgument) {
  auto expect_bad = [&](const SimOptions& o, const std::string& substring) {
    absl::Status s = ValidateSimOptions(*psf_, o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << substring;
    EXPECT_NE(s.message().find(substring), std::string::npos) << s;
  };
  const SimOptions good = SmallOptions(1, SimNoise::kPoisson);
  EXPECT_TRUE(ValidateSimOptions(*psf_, good).ok());
  SimOptions o = good;
  o.fiber_begin = 498;
  expect_bad(o, "fibres [498, 504)");
  o = good;
  o.nfibers = 0;
  expect_bad(o, "non-empty range");
  o = good;
  o.wmin = 5000.0;
  expect_bad(o, "outside the PSF domain");
  o = good;
  o.dw = 0.0;
  expect_bad(o, "simulator options");
  o = good;
  o.oversample = 0;
  expect_bad(o, "oversample");
  o = good;
  o.read_noise = {3.0, 3.0, 3.0};
  expect_bad(o, "1 value or 4");
  o = good;
  o.read_noise = {-1.0};
  expect_bad(o, "positive");
  o = good;
  o.num_hot_pixels = -1;
  expect_bad(o, "hot pixel");
  o = good;
  o.height = 4129;
  expect_bad(o, "cut-out 4129 x 0");
  o = good;
  o.width = -1;
  expect_bad(o, "outside the CCD");
  o = good;
  o.wmin = 5543.0;  // a grid that reaches past the domain: only when extrapolation is asked
  expect_bad(o, "outside the PSF domain");
  o.allow_extrapolation = true;
  EXPECT_TRUE(ValidateSimOptions(*psf_, o).ok());
  EXPECT_FALSE(MakeSimSpectraOnGrid(good, {6000.0}).ok());
  EXPECT_FALSE(MakeSimSpectraOnGrid(good, {6000.0, 6000.0, 6001.0}).ok());
  // SimulateFrame validates too, and checks the spectra against the options.
  o = good;
  o.fiber_begin = 600;
  EXPECT_EQ(SimulateFrame(*psf_, SimSpectra{}, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimulateFrame(*psf_, SimSpectra{}, good).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Writing into a missing directory fails cleanly.
  auto spectra = MakeSimSpectra(good);
  ASSERT_TRUE(spectra.ok());
  FillTruthFlux(&*spectra);
  SimFrame empty;
  EXPECT_FALSE(WriteTruth(dir_ + "/no/such/dir/t.fits", *spectra, empty, good).ok());
}

// A cut-out is the full CCD's top-left corner: the same model, and the same noise (one
// random stream per row, drawn from column 0).
TEST_F(SimulatorTest, CutOutIsTheCornerOfTheFullFrame) {
  SimOptions o = SmallOptions(3, SimNoise::kPoisson);
  o.fiber_begin = 0;
  auto spectra = GenerateSpectra(o);
  ASSERT_TRUE(spectra.ok());
  auto full = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(full.ok()) << full.status();
  o.height = 1500;
  o.width = 120;
  auto cut = SimulateFrame(*psf_, *spectra, o);
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_EQ(cut->height, 1500);
  ASSERT_EQ(cut->width, 120);
  double lit = 0;
  for (int y = 0; y < cut->height; ++y) {
    for (int x = 0; x < cut->width; ++x) {
      const std::size_t pc = static_cast<std::size_t>(y) * 120 + x;
      const std::size_t pf = static_cast<std::size_t>(y) * full->width + x;
      ASSERT_EQ(cut->model[pc], full->model[pf]) << y << " " << x;
      ASSERT_EQ(cut->image[pc], full->image[pf]) << y << " " << x;
      ASSERT_EQ(cut->ivar[pc], full->ivar[pf]) << y << " " << x;
      lit += cut->model[pc];
    }
  }
  EXPECT_GT(lit, 1000.0);  // fibres 0-5 at 6000-6100 A fall inside the cut-out
}

// Spectra on an explicit grid (a plan's padded grid) light exactly those wavelengths.
TEST_F(SimulatorTest, SpectraOnAnExplicitGrid) {
  SimOptions o = SmallOptions(1, SimNoise::kNone);
  const std::vector<double> wave = {5990.0, 5990.8, 5991.6, 5992.4};
  auto s = MakeSimSpectraOnGrid(o, wave);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->wave, wave);
  EXPECT_EQ(s->fine_wave, wave);
  ASSERT_EQ(s->dwave.size(), 4u);
  EXPECT_NEAR(s->dwave[0], 0.8, 1e-9);
  EXPECT_EQ(s->fine_flux.size(), 6u * 4);
  EXPECT_EQ(s->targetid.size(), 6u);
}

TEST_F(SimulatorTest, PsfWithoutCcdSizeIsRejected) {
  const std::string path = dir_ + "/nonpix.fits";
  fs::copy_file(testing::BundledPsfPath(), path);
  fitsfile* f = nullptr;
  int status = 0;
  fits_open_diskfile(&f, path.c_str(), READWRITE, &status);
  fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("PSF"), 0, &status);
  fits_delete_key(f, "NPIX_Y", &status);
  fits_close_file(f, &status);
  ASSERT_EQ(status, 0);
  auto psf = Psf::Load(path);
  ASSERT_TRUE(psf.ok()) << psf.status();
  EXPECT_EQ(psf->npix_y(), 0);
  absl::Status s = ValidateSimOptions(*psf, SmallOptions(1, SimNoise::kNone));
  EXPECT_NE(s.message().find("NPIX_X/NPIX_Y"), std::string::npos) << s;
}

}  // namespace
}  // namespace spexd::core
