// libFuzzer target: tile-compressed images. Every image HDU of an in-memory
// FITS file is decoded through CFITSIO as the readers would (as float64 and as 16-bit
// integers, within a pixel bound), after FitsFile::OpenMemory's checks; then the same
// bytes go to the preproc and PSF readers (uploads). Seeds: small files whose MASK, IMAGE
// or XTRACE is RICE_1, GZIP_1, GZIP_2, HCOMPRESS_1 or PLIO_1-compressed, and the
// crash inputs (tests/fuzz/corpus/compressed, regressions/compressed).
#include <cstddef>
#include <cstdint>

#include "core/io/fits_file.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"

namespace {

constexpr long kMaxPixels = 1 << 20;  // the readers bound images further (max_image_pixels)

void DecodeEveryImage(const uint8_t* data, size_t size) {
  auto file = spexd::core::FitsFile::OpenMemory(data, size, "fuzz.fits");
  if (!file.ok()) return;
  auto n = file->NumHdus();
  if (!n.ok()) return;
  for (int i = 0; i < *n && i < 8; ++i) {
    if (!file->MoveToHduIndex(i).ok()) return;
    auto info = file->GetImageInfo();
    if (!info.ok() || info->naxes.empty()) continue;
    long pixels = 1;
    for (long a : info->naxes) pixels = a > 0 && pixels <= kMaxPixels / a ? pixels * a : kMaxPixels + 1;
    if (pixels > kMaxPixels) continue;
    (void)file->ReadImage<double>();
    (void)file->ReadImage<int16_t>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeEveryImage(data, size);
  spexd::core::PreprocOptions options;
  auto frame = spexd::core::ReadPreprocFromMemory(data, size, "fuzz.fits", options);
  if (frame.ok()) {
    const std::size_t n = static_cast<std::size_t>(frame->height) * frame->width;
    if (frame->image.size() != n || frame->ivar.size() != n) __builtin_trap();
  }
  auto psf = spexd::core::Psf::LoadFromMemory(data, size, "fuzz-psf.fits");
  if (psf.ok() && psf->nspec() > 0) {
    volatile double x = psf->X(psf->nspec() - 1, 0.5 * (psf->wavemin() + psf->wavemax()));
    (void)x;
  }
  return 0;
}
