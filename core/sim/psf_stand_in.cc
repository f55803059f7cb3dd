#include "core/sim/psf_stand_in.h"

#include <fitsio.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

// Adds `shift` to Legendre coefficient 0 of every fibre's trace in image HDU `extname`
// ([nspec][ncoeff], spec §1.2) and refreshes the HDU's checksums.
absl::Status ShiftTrace(fitsfile* f, const char* extname, double shift) {
  int status = 0;
  fits_movnam_hdu(f, IMAGE_HDU, const_cast<char*>(extname), 0, &status);
  long naxes[2] = {0, 0};
  int naxis = 0;
  fits_get_img_dim(f, &naxis, &status);
  fits_get_img_size(f, 2, naxes, &status);
  if (status != 0 || naxis != 2) {
    return absl::InvalidArgumentError(absl::StrCat(extname, ": missing or not 2-D"));
  }
  const long n = naxes[0] * naxes[1];
  std::vector<double> c(static_cast<std::size_t>(n));
  fits_read_img(f, TDOUBLE, 1, n, nullptr, c.data(), nullptr, &status);
  for (long s = 0; s < naxes[1]; ++s) c[static_cast<std::size_t>(s * naxes[0])] += shift;
  fits_write_img(f, TDOUBLE, 1, n, c.data(), &status);
  fits_write_chksum(f, &status);
  if (status != 0) return absl::InternalError(absl::StrCat(extname, ": CFITSIO status ", status));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteShiftedPsf(const std::string& in, const std::string& out, double dx, double dy) {
  int status = 0;
  fitsfile* src = nullptr;
  fitsfile* dst = nullptr;
  fits_open_file(&src, in.c_str(), READONLY, &status);
  fits_create_file(&dst, ("!" + out).c_str(), &status);
  fits_copy_file(src, dst, 1, 1, 1, &status);
  if (src != nullptr) {
    int close_status = 0;
    fits_close_file(src, &close_status);
  }
  if (status != 0) {
    if (dst != nullptr) {
      int close_status = 0;
      fits_delete_file(dst, &close_status);
    }
    return absl::InternalError(absl::StrCat(in, ": copy to ", out, " failed, CFITSIO status ", status));
  }
  absl::Status st = ShiftTrace(dst, "XTRACE", dx);
  if (st.ok()) st = ShiftTrace(dst, "YTRACE", dy);
  fits_close_file(dst, &status);
  if (st.ok() && status != 0) st = absl::InternalError(absl::StrCat(out, ": CFITSIO status ", status));
  return st;
}

}  // namespace spexd::core
