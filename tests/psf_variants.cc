#include "tests/psf_variants.h"

#include <fitsio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// The bundled PSF's bytes, searched as LoadBundledPsf does.
std::string BundledPsfBytes() {
  for (const std::string& path : {SharedDataPath("psf/psf-r0-00051060.fits"), BundledPsfPath(),
                                  std::string("tests/data/psf-r0-00051060.fits")}) {
    if (path.empty()) continue;
    std::string bytes = ReadBytes(path);
    if (!bytes.empty()) return bytes;
  }
  return "";
}

// Rewrites the XTRACE image (NAXIS1 coefficients x NAXIS2 fibres) of the file at `path`.
bool SpreadXTrace(const std::string& path, int stride) {
  fitsfile* f = nullptr;
  int status = 0;
  char extname[] = "XTRACE";
  long naxes[2] = {0, 0};
  int naxis = 0;
  fits_open_file(&f, path.c_str(), READWRITE, &status);
  fits_movnam_hdu(f, IMAGE_HDU, extname, 0, &status);
  fits_get_img_dim(f, &naxis, &status);
  fits_get_img_size(f, 2, naxes, &status);
  if (status == 0 && naxis != 2) status = BAD_NAXIS;
  const long ncoeff = naxes[0], nspec = naxes[1];
  std::vector<double> c(static_cast<std::size_t>(std::max(0L, ncoeff * nspec)));
  long first[2] = {1, 1};
  fits_read_pix(f, TDOUBLE, first, ncoeff * nspec, nullptr, c.data(), nullptr, &status);
  if (status == 0) {
    std::vector<double> out(c.size());
    for (long s = 0; s < nspec; ++s) {
      const long from = std::min(s * stride, nspec - 1);
      std::copy_n(c.begin() + from * ncoeff, ncoeff, out.begin() + s * ncoeff);
    }
    fits_write_pix(f, TDOUBLE, first, ncoeff * nspec, out.data(), &status);
  }
  int close_status = 0;
  if (f != nullptr) fits_close_file(f, &close_status);
  if (status != 0 || close_status != 0) {
    char text[FLEN_STATUS];
    fits_get_errstatus(status != 0 ? status : close_status, text);
    ADD_FAILURE() << "rewriting XTRACE of " << path << ": " << text;
    return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<const core::Psf> LoadBundledPsfWithSpreadTraces(int stride) {
  const std::string bytes = BundledPsfBytes();
  if (bytes.empty()) {
    ADD_FAILURE() << "bundled PSF not found";
    return nullptr;
  }
  const std::string path = ::testing::TempDir() + "spread-psf-" + std::to_string(getpid()) + ".fits";
  if (!WriteBytes(path, bytes) || !SpreadXTrace(path, stride)) {
    std::remove(path.c_str());
    return nullptr;
  }
  auto psf = core::Psf::Load(path);
  std::remove(path.c_str());
  if (!psf.ok()) {
    ADD_FAILURE() << psf.status();
    return nullptr;
  }
  return std::make_shared<const core::Psf>(std::move(psf).value());
}

}  // namespace spexd::testing
