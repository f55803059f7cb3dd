#include "tests/integration/synthetic_frame.h"

#include <fitsio.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/fits_file.h"
#include "core/spots.h"
#include "core/status_macros.h"

namespace spexd::testing {
namespace {

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

}  // namespace

absl::StatusOr<std::string> MakeSyntheticPreproc(const core::Psf& psf,
                                                 const SyntheticFrameOptions& o) {
  // Cover every patch window: the traces from 40 A below to 100 A above the grid (the
  // padding and the last patch's extra bins), plus a stamp's half-width.
  const double lo = o.wmin - 40, hi = o.wmax + 100;
  double ymax = 0, xmax = 0;
  for (int f = o.fiber_begin; f < o.fiber_begin + o.nfibers; ++f) {
    for (double w = lo; w <= hi; w += 10) {
      ymax = std::max(ymax, psf.Y(f, w));
      xmax = std::max(xmax, psf.X(f, w));
    }
  }
  const int height = static_cast<int>(ymax) + 3 * psf.hsizey() + 20;
  const int width = o.width > 0 ? o.width : static_cast<int>(xmax) + 3 * psf.hsizex() + 20;
  const int ny = 2 * psf.hsizey() + 1, nx = 2 * psf.hsizex() + 1;
  std::vector<double> model(static_cast<std::size_t>(height) * width, 0.0);
  std::vector<double> stamp(static_cast<std::size_t>(ny) * nx);
  for (int f = o.fiber_begin; f < o.fiber_begin + o.nfibers; ++f) {
    const double continuum = 40.0 + 3.0 * (f % 7);
    for (double w = lo; w <= hi; w += 0.4) {
      const double line = 400.0 * std::exp(-0.5 * std::pow((w - (o.wmin + 13.0 + f % 5)) / 0.9, 2));
      const double photons = (continuum + line) * 0.4;
      int32_t xc = 0, yc = 0;
      core::EvaluateSpot(psf, f, w, stamp.data(), &xc, &yc);
      for (int j = 0; j < ny; ++j) {
        for (int i = 0; i < nx; ++i) {
          const int y = yc + j, x = xc + i;
          if (y < 0 || y >= height || x < 0 || x >= width) continue;
          model[static_cast<std::size_t>(y) * width + x] += photons * stamp[static_cast<std::size_t>(j) * nx + i];
        }
      }
    }
  }
  std::mt19937 rng(o.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const double read_var = 9.0;
  std::vector<float> image(model.size()), ivar(model.size());
  std::vector<int16_t> mask(model.size(), 0);
  for (std::size_t i = 0; i < model.size(); ++i) {
    const double var = std::max(model[i], 0.0) + read_var;
    image[i] = static_cast<float>(model[i] + std::sqrt(var) * normal(rng));
    ivar[i] = static_cast<float>(1.0 / var);
  }
  // A hot pixel (masked by desispec's 0x2FF) and a BADREADNOISE pixel (bit 8, not).
  mask[static_cast<std::size_t>(height / 2) * width + width / 3] = 2;
  mask[static_cast<std::size_t>(height / 2 + 7) * width + width / 4] = 256;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < std::min(o.dead_columns, width); ++x) {
      mask[static_cast<std::size_t>(y) * width + x] = 4;  // DEAD: masked by 0x2FF
    }
  }
  if (o.all_nan) std::fill(image.begin(), image.end(), std::numeric_limits<float>::quiet_NaN());

  SPEXD_ASSIGN_OR_RETURN(core::FitsFile f, core::FitsFile::CreateMemory("synthetic"));
  if (o.empty_image) {
    SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IMAGE", {}, nullptr));
  } else {
    SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IMAGE", {width, height}, image.data()));
  }
  SPEXD_RETURN_IF_ERROR(f.WriteKey("CAMERA", std::string("r0"), "camera"));
  SPEXD_RETURN_IF_ERROR(f.WriteKey("EXPID", 1234L, "exposure id"));
  SPEXD_RETURN_IF_ERROR(f.WriteKey("RDNOISE", 3.0, "read noise"));
  const long ivar_rows = o.ivar_shape_mismatch ? height - 1 : height;
  SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IVAR", {width, ivar_rows}, ivar.data()));
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
