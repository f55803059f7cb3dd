// libFuzzer target: the PSF reader (Psf::LoadFromMemory, as for an uploaded PSF). A
// loaded PSF is also evaluated once, since a reader that accepts bad tables would show
// up there (out-of-range reads).
#include <cstddef>
#include <cstdint>

#include "core/io/psf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto psf = spexd::core::Psf::LoadFromMemory(data, size, "fuzz-psf.fits");
  if (psf.ok() && psf->nspec() > 0) {
    const double wave = 0.5 * (psf->wavemin() + psf->wavemax());
    volatile double x = psf->X(psf->nspec() - 1, wave);
    volatile double y = psf->Y(0, wave);
    (void)x;
    (void)y;
  }
  return 0;
}
