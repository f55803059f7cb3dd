// Host time of the CUDA backend's per-batch run layout: MakeBatchEntries and
// BuildRunLayout (cuda/kernels/batch_layout.h) for an r frame's batches of 5 bundles, the choices
// of the default backend (tiled Cholesky, trailing inversion). BatchExtractor::Enqueue
// builds one for every batch of every frame, between a batch's normal equations and its
// Cholesky. Plain C++ on integer addresses: no GPU needed. One warm-up round, then the
// median and p90 of --repeats rounds per batch, as JSON:
//   spexd_run_layout_bench [--psf tests/data/psf-r0-00051060.fits] [--repeats N (9)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/io/psf.h"
#include "core/plan/desi_cameras.h"
#include "core/plan/extraction_params.h"
#include "core/plan/patch_plan.h"
#include "cuda/kernels/batch_layout.h"

namespace {

using namespace spexd;

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string psf_path = "tests/data/psf-r0-00051060.fits";
  int repeats = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--psf") == 0) psf_path = argv[i + 1];
    else if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
    else { std::fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
  }
  auto psf = core::Psf::Load(psf_path);
  if (!psf.ok()) { std::fprintf(stderr, "%s (pass --psf)\n", psf.status().ToString().c_str()); return 2; }
  // A full frame of the PSF's camera: its DESI grid on its CCD (NPIX_Y x NPIX_X).
  auto arm = core::DesiArmForPsf(*psf);
  if (!arm.ok()) { std::fprintf(stderr, "%s\n", arm.status().ToString().c_str()); return 2; }
  core::ExtractionParams params;
  params.nspec = 500;
  params.wmin = arm->wmin;
  params.wmax = arm->wmax;
  params.dw = arm->dw;
  auto plan = core::BuildPatchPlan(params, *psf, psf->npix_y(), psf->npix_x());
  if (!plan.ok()) { std::fprintf(stderr, "%s\n", plan.status().ToString().c_str()); return 1; }
  cuda::SlotAddresses slots;  // any distinct, aligned bases: the layout is integer arithmetic
  slots.m = 1ull << 40;
  slots.x = 1ull << 41;
  slots.t = 1ull << 42;
  slots.c = 1ull << 43;
  slots.ld = plan->max_n;
  slots.t_stride = static_cast<int64_t>(cuda::MaxBlocks(*plan)) * plan->nwavetot * plan->nwavetot;
  cuda::LayoutChoices choices;
  const int nbundles = static_cast<int>(plan->bundle_first_patch.size()) - 1;
  std::printf("{\n  \"benchmark\": \"run_layout\", \"psf\": \"%s\", \"repeats\": %d,\n  \"batches\": [\n",
              psf_path.c_str(), repeats);
  for (int b0 = 0; b0 < nbundles; b0 += 5) {
    std::vector<int> bundles;
    for (int b = b0; b < std::min(nbundles, b0 + 5); ++b) bundles.push_back(b);
    std::vector<double> ms;
    std::size_t ptrs = 0, entries = 0;
    for (int r = 0; r <= repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      cuda::RunLayout layout =
          cuda::BuildRunLayout(*plan, cuda::MakeBatchEntries(*plan, bundles, 0.0), slots, choices);
      const double t = Ms(t0);
      if (r > 0) ms.push_back(t);  // round 0 is the warm-up
      ptrs = layout.ptrs.size();
      entries = layout.entries.size();
    }
    std::sort(ms.begin(), ms.end());
    std::printf("    {\"first_bundle\": %d, \"entries\": %zu, \"pointers\": %zu, \"median_ms\": %.3f, "
                "\"p90_ms\": %.3f}%s\n",
                b0, entries, ptrs, ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)],
                b0 + 5 < nbundles ? "," : "");
  }
  std::printf("  ]\n}\n");
  return 0;
}
