// PSF files altered for tests: geometries the committed DESI PSF does not have.
#ifndef SPEXD_TESTS_PSF_VARIANTS_H_
#define SPEXD_TESTS_PSF_VARIANTS_H_

#include <memory>

#include "core/io/psf.h"

namespace spexd::testing {

// The bundled PSF (LoadBundledPsf's file) with fibre f's x trace replaced by fibre
// min(f * stride, nspec - 1)'s: traces `stride` times as far apart as DESI's (~7 px), so
// that at stride >= 3 the 11-pixel stamps of neighbouring fibres no longer overlap and a
// patch's spectra do not couple (core::CoupledBand 0). The y traces and spot shapes are
// the original fibre's. Written to a temporary file with CFITSIO, loaded, removed.
// nullptr (with the reason as a test failure) when the PSF cannot be found or written.
std::shared_ptr<const core::Psf> LoadBundledPsfWithSpreadTraces(int stride);

// The bundled PSF with fibre f's x trace moved towards fibre 0's, its distance scaled by
// `factor` (the constant Legendre coefficient; the shape terms are fibre f's own): at 0.75
// the traces are about 5.5 px apart, so that the 17-pixel stamps of fibres three apart
// overlap (core::CoupledBand 3; DESI's give 2).
std::shared_ptr<const core::Psf> LoadBundledPsfWithSqueezedTraces(double factor);

// The bundled PSF with every fibre's y trace stretched `factor` times about its value at
// the middle of the wavelength range (the Legendre coefficients past the constant scaled):
// consecutive wavelengths `factor` times as many rows apart, so that the stamps of eight
// of them cover a taller box than the tensor-core normal equations stage at once
// (cuda/kernels/normal_equations_dmma.cu); only wavelengths near the middle stay on the CCD.
std::shared_ptr<const core::Psf> LoadBundledPsfWithStretchedYTraces(double factor);

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_PSF_VARIANTS_H_
