#include "tests/cuda/synthetic_frame.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/spots.h"

namespace spexd::testing {

double SyntheticFlux(int fiber, double wave) {
  // Continuum with slow structure, plus emission lines every ~97 A of varying strength.
  double f = 150.0 + 60.0 * std::sin(wave / 53.0 + 0.37 * fiber) + 0.02 * (wave - 6000.0);
  const double spacing = 97.0;
  const double centre = std::round(wave / spacing) * spacing + 7.0 * std::sin(fiber * 1.3);
  const double amp = 800.0 * (1.0 + std::sin(centre * 0.11 + fiber));
  const double d = (wave - centre) / 1.1;
  f += amp * std::exp(-0.5 * d * d);
  return std::max(f, 0.0);
}

core::PreprocImage MakeSyntheticFrame(const core::Geometry& geometry, const SyntheticOptions& o) {
  const core::PatchPlan& plan = geometry.plan();
  core::PreprocImage img;
  img.height = plan.image_height;
  img.width = plan.image_width;
  const std::size_t npix = static_cast<std::size_t>(img.height) * img.width;
  img.image.assign(npix, 0.0);
  img.ivar.assign(npix, 0.0);
  img.source_name = "synthetic";
  const int sny = plan.stamp_ny, snx = plan.stamp_nx;
  // Project bundle by bundle (EvaluateSpots is multi-threaded; accumulation is serial so
  // that the image is the same for any thread count).
  for (int b = 0; b < plan.nbundles; ++b) {
    const int f0 = plan.bundle_fiber_begin(b);
    core::Spots spots = core::EvaluateSpots(geometry.psf(), f0, plan.bundlesize, plan.fullwave);
    for (int f = 0; f < plan.bundlesize; ++f) {
      for (int w = 0; w < spots.nwave; ++w) {
        const double flux = SyntheticFlux(f0 + f, plan.fullwave[w]);
        const double* st = spots.stamp(f, w);
        const int yc = spots.corner_y(f, w), xc = spots.corner_x(f, w);
        for (int iy = 0; iy < sny; ++iy) {
          const int y = yc + iy;
          if (y < 0 || y >= img.height) continue;
          for (int ix = 0; ix < snx; ++ix) {
            const int x = xc + ix;
            if (x < 0 || x >= img.width) continue;
            img.image[static_cast<std::size_t>(y) * img.width + x] += flux * st[iy * snx + ix];
          }
        }
      }
    }
  }
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const double rn2 = o.read_noise * o.read_noise;
  for (std::size_t p = 0; p < npix; ++p) {
    const double var = std::max(img.image[p], 0.0) + rn2;
    if (o.noise) img.image[p] += std::sqrt(var) * normal(rng);
    img.ivar[p] = 1.0 / var;
  }
  // Masked pixels on the traces of random fibres (spec §2.1: ivar = 0).
  std::uniform_int_distribution<int> fib(plan.specmin, plan.specmin + plan.nspec - 1);
  std::uniform_int_distribution<int> wav(0, static_cast<int>(plan.fullwave.size()) - 1);
  std::uniform_int_distribution<int> off(-3, 3);
  for (int k = 0; k < o.masked_pixels; ++k) {
    const int f = fib(rng), w = wav(rng);
    const int y = plan.corner_y(f, w) + plan.stamp_ny / 2 + off(rng);
    const int x = plan.corner_x(f, w) + plan.stamp_nx / 2 + off(rng);
    if (y < 0 || y >= img.height || x < 0 || x >= img.width) continue;
    img.ivar[static_cast<std::size_t>(y) * img.width + x] = 0.0;
    ++img.n_masked;
  }
  if (o.float32_values) {
    for (std::size_t p = 0; p < npix; ++p) {
      img.image[p] = static_cast<double>(static_cast<float>(img.image[p]));
      img.ivar[p] = static_cast<double>(static_cast<float>(img.ivar[p]));
    }
  }
  return img;
}

}  // namespace spexd::testing
