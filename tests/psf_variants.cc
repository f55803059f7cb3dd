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

// Rewrites the trace image `extname` (NAXIS1 coefficients x NAXIS2 fibres) of the file at
// `path`: out = f(fibre, coefficients of every fibre).
template <class F>
bool RewriteTrace(const std::string& path, const char* extname, F f) {
  fitsfile* fp = nullptr;
  int status = 0;
  long naxes[2] = {0, 0};
  int naxis = 0;
  std::string name(extname);
  fits_open_file(&fp, path.c_str(), READWRITE, &status);
  fits_movnam_hdu(fp, IMAGE_HDU, name.data(), 0, &status);
  fits_get_img_dim(fp, &naxis, &status);
  fits_get_img_size(fp, 2, naxes, &status);
  if (status == 0 && naxis != 2) status = BAD_NAXIS;
  const long ncoeff = naxes[0], nspec = naxes[1];
  std::vector<double> c(static_cast<std::size_t>(std::max(0L, ncoeff * nspec)));
  long first[2] = {1, 1};
  fits_read_pix(fp, TDOUBLE, first, ncoeff * nspec, nullptr, c.data(), nullptr, &status);
  if (status == 0) {
    std::vector<double> out(c.size());
    for (long s = 0; s < nspec; ++s) {
      for (long k = 0; k < ncoeff; ++k) out[s * ncoeff + k] = f(s, k, ncoeff, nspec, c);
    }
    fits_write_pix(fp, TDOUBLE, first, ncoeff * nspec, out.data(), &status);
  }
  int close_status = 0;
  if (fp != nullptr) fits_close_file(fp, &close_status);
  if (status != 0 || close_status != 0) {
    char text[FLEN_STATUS];
    fits_get_errstatus(status != 0 ? status : close_status, text);
    ADD_FAILURE() << "rewriting " << extname << " of " << path << ": " << text;
    return false;
  }
  return true;
}

// The bundled PSF with `rewrite(path)` applied to a temporary copy, loaded, removed.
template <class F>
std::shared_ptr<const core::Psf> LoadRewrittenPsf(const char* tag, F rewrite) {
  const std::string bytes = BundledPsfBytes();
  if (bytes.empty()) {
    ADD_FAILURE() << "bundled PSF not found";
    return nullptr;
  }
  const std::string path =
      ::testing::TempDir() + tag + "-psf-" + std::to_string(getpid()) + ".fits";
  if (!WriteBytes(path, bytes) || !rewrite(path)) {
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

}  // namespace

std::shared_ptr<const core::Psf> LoadBundledPsfWithSpreadTraces(int stride) {
  return LoadRewrittenPsf("spread", [stride](const std::string& path) {
    return RewriteTrace(path, "XTRACE", [stride](long s, long k, long ncoeff, long nspec,
                                                 const std::vector<double>& c) {
      return c[std::min(s * stride, nspec - 1) * ncoeff + k];
    });
  });
}

std::shared_ptr<const core::Psf> LoadBundledPsfWithSqueezedTraces(double factor) {
  return LoadRewrittenPsf("squeezed", [factor](const std::string& path) {
    return RewriteTrace(path, "XTRACE", [factor](long s, long k, long ncoeff, long,
                                                 const std::vector<double>& c) {
      return k == 0 ? c[0] + factor * (c[s * ncoeff] - c[0]) : c[s * ncoeff + k];
    });
  });
}

std::shared_ptr<const core::Psf> LoadBundledPsfWithStretchedYTraces(double factor) {
  return LoadRewrittenPsf("stretched", [factor](const std::string& path) {
    return RewriteTrace(path, "YTRACE", [factor](long s, long k, long ncoeff, long,
                                                 const std::vector<double>& c) {
      return k == 0 ? c[s * ncoeff] : factor * c[s * ncoeff + k];
    });
  });
}

}  // namespace spexd::testing
