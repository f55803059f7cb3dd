#include "tests/frame_fixtures.h"

#include <fitsio.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "core/io/fits_file.h"
#include "gtest/gtest.h"

namespace spexd::testing {

core::Frame MakeTestFrame(int nspec, int nwave, int ndiag, uint64_t seed, bool specials) {
  core::Frame f;
  f.specmin = 3;
  f.nspec = nspec;
  f.nwave = nwave;
  f.ndiag = ndiag;
  for (int w = 0; w < nwave; ++w) f.wave.push_back(5760.0 + 0.8 * w);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(100.0, 300.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::size_t n = static_cast<std::size_t>(nspec) * nwave;
  for (std::size_t i = 0; i < n; ++i) {
    f.flux.push_back(normal(rng));
    f.ivar.push_back(unit(rng) < 0.05 ? 0.0 : unit(rng) * 1e-3);
    f.chi2pix.push_back(unit(rng) * 3);
    f.mask.push_back(unit(rng) < 0.1 ? static_cast<uint32_t>(rng()) : 0u);  // high bit too
    f.pixmask_fraction.push_back(0.0);
  }
  for (std::size_t i = 0; i < n * (2 * ndiag + 1); ++i) f.rdiags.push_back(unit(rng) * 0.3);
  if (specials && n > 8) {
    const double inf = std::numeric_limits<double>::infinity();
    const double values[] = {std::nan(""), inf, -inf, -0.0, 1e-42, 1e39, -1e-310,
                             std::numeric_limits<double>::quiet_NaN()};
    for (std::size_t k = 0; k < std::size(values); ++k) {
      const std::size_t at = (k * 7919) % n;
      f.flux[at] = values[k];
      f.ivar[(at + 1) % n] = values[k];
      f.chi2pix[(at + 2) % n] = values[k];
      f.rdiags[(at * 3) % f.rdiags.size()] = values[k];
    }
  }
  return f;
}

std::string MakeTestFibermap(int rows, bool checksum) {
  auto fm = core::FitsFile::CreateMemory("fm");
  EXPECT_TRUE(fm.ok());
  int status = 0;
  fits_create_img(fm->get(), BYTE_IMG, 0, nullptr, &status);
  char* ttype[] = {const_cast<char*>("FIBER"), const_cast<char*>("TARGET_RA"),
                   const_cast<char*>("FLUX_R"), const_cast<char*>("TARGETID"),
                   const_cast<char*>("OBJTYPE")};
  char* tform[] = {const_cast<char*>("J"), const_cast<char*>("D"), const_cast<char*>("E"),
                   const_cast<char*>("K"), const_cast<char*>("3A")};
  fits_create_tbl(fm->get(), BINARY_TBL, rows, 5, ttype, tform, nullptr, "FIBERMAP", &status);
  long tileid = 80605;
  fits_update_key(fm->get(), TLONG, "TILEID", &tileid, "Tile ID", &status);
  for (int r = 0; r < rows; ++r) {
    int fiber = r;
    double ra = 150.0 + 0.001 * r;
    float flux = 1.5f * static_cast<float>(r);
    LONGLONG id = 39627000000000000LL + r;
    const char* type = r % 3 == 0 ? "SKY" : "TGT";
    fits_write_col(fm->get(), TINT, 1, r + 1, 1, 1, &fiber, &status);
    fits_write_col(fm->get(), TDOUBLE, 2, r + 1, 1, 1, &ra, &status);
    fits_write_col(fm->get(), TFLOAT, 3, r + 1, 1, 1, &flux, &status);
    fits_write_col(fm->get(), TLONGLONG, 4, r + 1, 1, 1, &id, &status);
    fits_write_col(fm->get(), TSTRING, 5, r + 1, 1, 1, const_cast<char**>(&type), &status);
  }
  if (checksum) fits_write_chksum(fm->get(), &status);
  EXPECT_EQ(status, 0);
  return *fm->TakeMemory();
}

int AppendFiberTable(core::FitsFile& f, int rows) {
  int status = 0;
  char* ttype[] = {const_cast<char*>("FIBER")};
  char* tform[] = {const_cast<char*>("J")};
  fits_create_tbl(f.get(), BINARY_TBL, rows, 1, ttype, tform, nullptr, "FIBERMAP", &status);
  std::vector<int32_t> fiber(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) fiber[static_cast<std::size_t>(i)] = i;
  fits_write_col(f.get(), TINT, 1, 1, 1, rows, fiber.data(), &status);
  return status;
}

core::BundleResult FrameRows(const core::Frame& f, int index, int row, int n) {
  core::BundleResult b;
  b.bundle = index;
  b.fiber_begin = f.specmin + row;
  b.nfibers = n;
  b.nwave = f.nwave;
  b.ndiag = f.ndiag;
  b.per_angstrom = true;
  const std::size_t nw = static_cast<std::size_t>(f.nwave);
  auto rows = [&](const std::vector<double>& v, std::size_t per_row) {
    return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(row * per_row),
                               v.begin() + static_cast<std::ptrdiff_t>((row + n) * per_row));
  };
  b.flux = rows(f.flux, nw);
  b.ivar = rows(f.ivar, nw);
  b.chi2pix = rows(f.chi2pix, nw);
  b.rdiags = rows(f.rdiags, nw * static_cast<std::size_t>(2 * f.ndiag + 1));
  return b;
}

core::FrameMetadata R1FrameMeta() {
  core::FrameMetadata meta;
  meta.image_header = {"CAMERA  = 'r1      '           / Spectrograph Camera",
                       "EXPTIME =                900.0 / Exposure time"};
  meta.in_psf = "psf-r1.fits";
  meta.in_img = "preproc-r1.fits";
  meta.wmin = 5760.0;
  meta.wmax = 7620.0;
  meta.dw = 0.8;
  return meta;
}

core::FrameFileShape FileShapeOf(const core::Frame& f) {
  return {f.specmin, f.nspec, f.nwave, f.ndiag, f.wave};
}

}  // namespace spexd::testing
