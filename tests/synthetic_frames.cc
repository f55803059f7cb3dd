#include "tests/synthetic_frames.h"

#include <fitsio.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/io/fits_file.h"
#include "core/sim/simulator.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace spexd::testing {
namespace {

// Photons per bin: continuum with slow structure, plus emission lines every ~97 A of
// varying strength.
double PaddedGridPhotons(int fiber, double wave) {
  double f = 150.0 + 60.0 * std::sin(wave / 53.0 + 0.37 * fiber) + 0.02 * (wave - 6000.0);
  const double spacing = 97.0;
  const double centre = std::round(wave / spacing) * spacing + 7.0 * std::sin(fiber * 1.3);
  const double amp = 800.0 * (1.0 + std::sin(centre * 0.11 + fiber));
  const double d = (wave - centre) / 1.1;
  f += amp * std::exp(-0.5 * d * d);
  return std::max(f, 0.0);
}

absl::Status CfitsioStatus(int status, const char* what) {
  if (status == 0) return absl::OkStatus();
  char text[FLEN_STATUS];
  fits_get_errstatus(status, text);
  return absl::InternalError(std::string(what) + ": " + text);
}

absl::Status WriteFibermap(core::FitsFile& f) {
  int status = 0;
  char ttype0[] = "FIBER", ttype1[] = "TARGETID", ttype2[] = "OBJTYPE";
  char tform0[] = "J", tform1[] = "K", tform2[] = "3A";
  char* ttype[] = {ttype0, ttype1, ttype2};
  char* tform[] = {tform0, tform1, tform2};
  char extname[] = "FIBERMAP";
  constexpr int kRows = 500;
  fits_create_tbl(f.get(), BINARY_TBL, kRows, 3, ttype, tform, nullptr, extname, &status);
  std::vector<int> fiber(kRows);
  std::vector<long long> target(kRows);
  std::vector<std::string> obj(kRows);
  std::vector<char*> objp(kRows);
  for (int i = 0; i < kRows; ++i) {
    fiber[i] = i;
    target[i] = 39627000000000000LL + i;
    obj[i] = (i % 10 == 3) ? "SKY" : "TGT";
    objp[i] = obj[i].data();
  }
  fits_write_col(f.get(), TINT, 1, 1, 1, kRows, fiber.data(), &status);
  fits_write_col(f.get(), TLONGLONG, 2, 1, 1, kRows, target.data(), &status);
  fits_write_col(f.get(), TSTRING, 3, 1, 1, kRows, objp.data(), &status);
  return CfitsioStatus(status, "writing FIBERMAP");
}

// The cut-out that holds fibres [f0, f1)'s traces over [lo, hi] plus margins.
void CutOutSize(const core::Psf& psf, int f0, int f1, double lo, double hi, int* height, int* width) {
  double ymax = 0, xmax = 0;
  for (int f = f0; f < f1; ++f) {
    for (double w = lo; w <= hi; w += 10) {
      ymax = std::max(ymax, psf.Y(f, w));
      xmax = std::max(xmax, psf.X(f, w));
    }
  }
  *height = static_cast<int>(ymax) + 3 * psf.hsizey() + 20;
  *width = static_cast<int>(xmax) + 3 * psf.hsizex() + 20;
}

}  // namespace

void MaskWindowRows(const core::PatchDesc& patch, int y0, int y1, core::PreprocImage* image) {
  for (int y = y0; y < y1; ++y) {
    double* row = image->ivar.data() + static_cast<std::size_t>(y) * image->width;
    std::fill(row + patch.x0, row + patch.x0 + patch.nx, 0.0);
  }
}

core::PreprocImage MakeSyntheticFrame(const core::Geometry& geometry, const SyntheticOptions& so) {
  const core::PatchPlan& plan = geometry.plan();
  core::SimOptions o;
  o.fiber_begin = plan.bundle_fiber_begin(0);
  o.nfibers = plan.nbundles * plan.bundlesize;
  o.wmin = plan.fullwave.front();
  o.wmax = plan.fullwave.back();
  o.dw = geometry.params().dw;
  o.allow_extrapolation = true;  // the padding reaches past the PSF's domain at the CCD's ends
  o.height = plan.image_height;
  o.width = plan.image_width;
  o.seed = so.seed;
  o.noise = so.noise ? core::SimNoise::kPoisson : core::SimNoise::kNone;
  o.read_noise = {so.read_noise};
  // The simulator spreads hot pixels over every row of the lit columns: scale the count
  // so that about `masked_pixels` of them fall on the plan's rows.
  int y0 = plan.image_height, y1 = 0;
  for (int f = plan.specmin; f < plan.specmin + plan.nspec; ++f) {
    for (int w : {0, static_cast<int>(plan.fullwave.size()) - 1}) {
      y0 = std::min(y0, plan.corner_y(f, w));
      y1 = std::max(y1, plan.corner_y(f, w) + plan.stamp_ny);
    }
  }
  const int lit_rows = std::clamp(y1, 1, plan.image_height) - std::clamp(y0, 0, plan.image_height - 1);
  o.num_hot_pixels = static_cast<int>(
      std::lround(static_cast<double>(so.masked_pixels) * plan.image_height / std::max(lit_rows, 1)));

  absl::StatusOr<core::SimSpectra> spectra = core::MakeSimSpectraOnGrid(o, plan.fullwave);
  if (!spectra.ok()) {
    ADD_FAILURE() << "MakeSyntheticFrame: " << spectra.status();
    return {};
  }
  const std::size_t nwave = spectra->wave.size();
  for (int f = 0; f < o.nfibers; ++f) {
    for (std::size_t k = 0; k < nwave; ++k) {
      // photons/A, so that the simulator's photons per bin (times dwave) are the profile's.
      spectra->fine_flux[static_cast<std::size_t>(f) * nwave + k] =
          PaddedGridPhotons(o.fiber_begin + f, spectra->wave[k]) / spectra->dwave[k];
    }
  }
  absl::StatusOr<core::SimFrame> frame = core::SimulateFrame(geometry.psf(), *spectra, o);
  if (!frame.ok()) {
    ADD_FAILURE() << "MakeSyntheticFrame: " << frame.status();
    return {};
  }
  core::PreprocImage image = core::ToPreprocImage(*frame);
  image.source_name = "synthetic";
  return image;
}

absl::StatusOr<std::string> MakeSyntheticPreproc(const core::Psf& psf,
                                                 const SyntheticFrameOptions& so) {
  // Every patch window: the traces from 40 A below to 100 A above the grid (the padding
  // and the last patch's extra bins), sampled every 0.4 A.
  core::SimOptions o;
  o.fiber_begin = so.fiber_begin;
  o.nfibers = so.nfibers;
  o.wmin = so.wmin - 40;
  o.wmax = so.wmax + 100;
  o.dw = 0.4;
  o.seed = so.seed;
  o.read_noise = {3.0};
  CutOutSize(psf, so.fiber_begin, so.fiber_begin + so.nfibers, o.wmin, o.wmax, &o.height, &o.width);
  if (so.width > 0) o.width = so.width;
  SPEXD_ASSIGN_OR_RETURN(core::SimSpectra spectra, core::MakeSimSpectra(o));
  const std::size_t nwave = spectra.wave.size();
  for (int i = 0; i < so.nfibers; ++i) {
    const int f = so.fiber_begin + i;
    const double continuum = 40.0 + 3.0 * (f % 7);
    for (std::size_t k = 0; k < nwave; ++k) {
      const double w = spectra.wave[k];
      const double line = 400.0 * std::exp(-0.5 * std::pow((w - (so.wmin + 13.0 + f % 5)) / 0.9, 2));
      spectra.fine_flux[static_cast<std::size_t>(i) * nwave + k] = continuum + line;
    }
  }
  SPEXD_ASSIGN_OR_RETURN(core::SimFrame frame, core::SimulateFrame(psf, spectra, o));
  const int height = frame.height, width = frame.width;
  std::vector<int16_t>& mask = frame.mask;
  mask[static_cast<std::size_t>(height / 2) * width + width / 3] = 2;
  mask[static_cast<std::size_t>(height / 2 + 7) * width + width / 4] = 256;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < std::min(so.dead_columns, width); ++x) {
      mask[static_cast<std::size_t>(y) * width + x] = 4;  // DEAD: masked by 0x2FF
    }
  }
  if (so.all_nan) {
    std::fill(frame.image.begin(), frame.image.end(), std::numeric_limits<float>::quiet_NaN());
  }

  SPEXD_ASSIGN_OR_RETURN(core::FitsFile f, core::FitsFile::CreateMemory("synthetic"));
  if (so.empty_image) {
    SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IMAGE", {}, nullptr));
  } else {
    SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IMAGE", {width, height}, frame.image.data()));
  }
  SPEXD_RETURN_IF_ERROR(f.WriteKey("CAMERA", std::string("r0"), "camera"));
  SPEXD_RETURN_IF_ERROR(f.WriteKey("EXPID", 1234L, "exposure id"));
  SPEXD_RETURN_IF_ERROR(f.WriteKey("RDNOISE", 3.0, "read noise"));
  const long ivar_rows = so.ivar_shape_mismatch ? height - 1 : height;
  SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IVAR", {width, ivar_rows}, frame.ivar.data()));
  SPEXD_RETURN_IF_ERROR(f.WriteImage<int16_t>("MASK", {width, height}, mask.data()));
  SPEXD_RETURN_IF_ERROR(WriteFibermap(f));
  return f.TakeMemory();
}

absl::StatusOr<std::string> WithExtraKeyword(const std::string& fits_bytes, const std::string& key,
                                             long value) {
  // Open a writable in-memory copy through CFITSIO and add the keyword.
  SPEXD_ASSIGN_OR_RETURN(core::FitsFile out, core::FitsFile::CreateMemory("copy"));
  SPEXD_ASSIGN_OR_RETURN(core::FitsFile in,
                         core::FitsFile::OpenMemory(fits_bytes.data(), fits_bytes.size(), "in"));
  SPEXD_ASSIGN_OR_RETURN(int nhdu, in.NumHdus());
  for (int h = 0; h < nhdu; ++h) {
    SPEXD_RETURN_IF_ERROR(in.MoveToHduIndex(h));
    SPEXD_RETURN_IF_ERROR(in.CopyCurrentHduTo(out));
    if (h == 0) SPEXD_RETURN_IF_ERROR(out.WriteKey(key.c_str(), value, "test variant"));
  }
  return out.TakeMemory();
}

}  // namespace spexd::testing
