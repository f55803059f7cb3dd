// Benchmark: the host work spexd's streaming task does per frame for a
// CUDA output region, without a GPU: per bundle the per-Angstrom conversion and usable-bin
// count, the copy of flux, ivar, resolution and chi2pix into the region (a memcpy into host
// memory here, the host-to-device copy on the GPU machine), the frame assembly for the
// specmask and the bundle's release; then the specmask and the mask rows' copy. On the
// critical path is what is left of it when the worker's last batch of bundles arrives.
//
// Bundles are shaped as a full r frame (500 fibres x 2326 wavelengths, 11 diagonals, 20
// bundles) with random values; each repetition gets fresh vectors (as the backend hands
// over), filled before the clock starts.
//
//   spexd_handoff_host_bench --psf PSF [--repeats 5] [--threads T (0: cores)]
//                            [--keep all|mask|both] [--prefault 1|0]
// JSON on stdout, a table on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/base/parallel_for.h"
#include "core/frame/frame.h"
#include "core/frame/output_layout.h"
#include "core/frame/usable_data.h"
#include "core/io/psf.h"
#include "core/plan/desi_cameras.h"
#include "core/plan/geometry.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace core = spexd::core;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

std::vector<core::BundleResult> Template(const core::PatchPlan& plan) {
  std::mt19937 rng(22);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<core::BundleResult> out(static_cast<std::size_t>(plan.nbundles));
  for (int b = 0; b < plan.nbundles; ++b) {
    core::BundleResult& r = out[static_cast<std::size_t>(b)];
    r.Allocate(b, plan.bundle_fiber_begin(b), plan.bundlesize, plan.nwave, plan.ndiag);
    for (std::size_t i = 0; i < r.flux.size(); ++i) {
      r.flux[i] = 100 * u(rng);
      r.ivar[i] = u(rng);
      r.chi2pix[i] = u(rng) < 0.01 ? 50 : u(rng);
      r.pixmask_fraction[i] = u(rng) < 0.02 ? 1.0 : 0.0;
    }
    for (double& v : r.rdiags) v = u(rng);
  }
  return out;
}

// The specmask computed the plain way (one thread, a strided gather per wavelength),
// timed for comparison only: the mask is core::ComputeSpecMask's.
double SerialStridedSpecmaskSeconds(const core::Frame& f) {
  const Clock::time_point t0 = Clock::now();
  const int ns = f.nspec, nw = f.nwave;
  std::vector<double> med_wave(static_cast<std::size_t>(nw)), med_fiber(static_cast<std::size_t>(ns)), tmp;
  for (int w = 0; w < nw; ++w) {
    tmp.clear();
    for (int s = 0; s < ns; ++s) tmp.push_back(f.chi2pix[static_cast<std::size_t>(s) * nw + w]);
    med_wave[static_cast<std::size_t>(w)] = core::Median(tmp);
  }
  for (int s = 0; s < ns; ++s) {
    auto begin = f.chi2pix.begin() + static_cast<std::ptrdiff_t>(s) * nw;
    med_fiber[static_cast<std::size_t>(s)] = core::Median(std::vector<double>(begin, begin + nw));
  }
  std::vector<uint32_t> mask(f.chi2pix.size());
  for (std::size_t i = 0; i < mask.size(); ++i) {
    const std::size_t s = i / static_cast<std::size_t>(nw), w = i % static_cast<std::size_t>(nw);
    mask[i] = f.chi2pix[i] > 5 * med_wave[w] && f.chi2pix[i] > 5 * med_fiber[s] ? 1u : 0u;
  }
  return Since(t0);
}

std::map<std::string, double> RunOnce(const core::Geometry& geo, const std::vector<core::BundleResult>& tmpl,
                                      core::FrameAssembler::Keep keep, bool prefault,
                                      core::TaskPool* pool, std::vector<unsigned char>* region) {
  const core::PatchPlan& plan = geo.plan();
  const core::OutputLayout layout = core::MakeOutputLayout(plan.nspec, plan.nwave, plan.ndiag);
  std::vector<std::unique_ptr<core::BundleResult>> bundles;
  for (const auto& b : tmpl) bundles.push_back(std::make_unique<core::BundleResult>(b));
  std::map<std::string, double> t;
  // As spexd does, on the loader thread before the job runs: not in the total.
  const Clock::time_point p0 = Clock::now();
  core::FrameAssembler assembler(geo, false, keep);
  if (prefault) assembler.Prefault(pool);
  t["prefault (loader, not in total)"] = Since(p0);
  const Clock::time_point start = Clock::now();
  const std::size_t nd = static_cast<std::size_t>(2 * plan.ndiag + 1);
  for (auto& bundle : bundles) {
    core::BundleResult& b = *bundle;
    Clock::time_point t0 = Clock::now();
    core::FinalizeBundle(geo.dwave(), &b);
    (void)core::CountUsableBins(b);
    t["finalize"] += Since(t0);
    t0 = Clock::now();
    const std::size_t first = static_cast<std::size_t>(b.fiber_begin - plan.specmin) * plan.nwave;
    const std::size_t bins = b.flux.size();
    std::memcpy(region->data() + layout.flux + first * 8, b.flux.data(), bins * 8);
    std::memcpy(region->data() + layout.ivar + first * 8, b.ivar.data(), bins * 8);
    std::memcpy(region->data() + layout.resolution + first * nd * 8, b.rdiags.data(), bins * nd * 8);
    std::memcpy(region->data() + layout.chi2pix + first * 8, b.chi2pix.data(), bins * 8);
    t["copies (memcpy here)"] += Since(t0);
    t0 = Clock::now();
    (void)assembler.Add(b);
    t["assemble"] += Since(t0);
    t0 = Clock::now();
    bundle.reset();
    t["release"] += Since(t0);
  }
  Clock::time_point t0 = Clock::now();
  core::Frame frame = assembler.Finish(core::MaskPolicy::kDesispec, pool);
  t["specmask"] = Since(t0);
  t["specmask serial strided (before)"] = SerialStridedSpecmaskSeconds(frame);
  t0 = Clock::now();
  std::memcpy(region->data() + layout.mask, frame.mask.data(), frame.mask.size() * 4);
  t["mask copy"] = Since(t0);
  t0 = Clock::now();
  frame = core::Frame();
  t["frame release"] = Since(t0);
  t["total"] = Since(start) - t["specmask serial strided (before)"];
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string psf_path, keep_arg = "both";
  int repeats = 5, threads = 0;
  bool prefault = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--psf") psf_path = v;
    else if (a == "--repeats") repeats = std::max(1, std::stoi(v));
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--keep") keep_arg = v;
    else if (a == "--prefault") prefault = v != "0";
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (psf_path.empty()) {
    std::fprintf(stderr, "usage: %s --psf PSF [--repeats N] [--threads T] [--keep all|mask|both] [--prefault 1|0]\n",
                 argv[0]);
    return 2;
  }
  auto psf = core::Psf::Load(psf_path);
  if (!psf.ok()) {
    std::fprintf(stderr, "%s\n", psf.status().ToString().c_str());
    return 1;
  }
  // Any camera: its DESI grid (core/plan/desi_cameras.h) on the CCD the PSF was fitted on.
  absl::StatusOr<core::DesiArm> arm = core::DesiArmForPsf(*psf);
  if (!arm.ok()) {
    std::fprintf(stderr, "%s\n", arm.status().ToString().c_str());
    return 1;
  }
  core::ExtractionParams p;
  p.wmin = arm->wmin;
  p.wmax = arm->wmax;
  p.dw = arm->dw;
  p.nspec = 500;
  const int height = psf->npix_y(), width = psf->npix_x();
  auto geo = core::Geometry::Create(std::make_shared<const core::Psf>(*std::move(psf)), p, height, width,
                                    /*cache_spots=*/false);
  if (!geo.ok()) {
    std::fprintf(stderr, "%s\n", geo.status().ToString().c_str());
    return 1;
  }
  const int nthreads = threads > 0 ? threads : core::HardwareThreads();
  std::unique_ptr<core::TaskPool> pool = core::MakeTaskPool(nthreads - 1);
  const std::vector<core::BundleResult> tmpl = Template((*geo)->plan());
  const core::PatchPlan& plan = (*geo)->plan();
  std::vector<unsigned char> region(core::MakeOutputLayout(plan.nspec, plan.nwave, plan.ndiag).total_bytes);
  std::memset(region.data(), 0, region.size());
  std::printf("{\"threads\": %d, \"repeats\": %d, \"prefault\": %d", nthreads, repeats, prefault ? 1 : 0);
  for (const auto& [name, keep] : {std::pair<const char*, core::FrameAssembler::Keep>{"all", core::FrameAssembler::Keep::kAll},
                                   {"mask", core::FrameAssembler::Keep::kMaskInputs}}) {
    if (keep_arg != "both" && keep_arg != name) continue;
    (void)RunOnce(**geo, tmpl, keep, prefault, pool.get(), &region);  // warm-up
    std::map<std::string, std::vector<double>> runs;
    for (int r = 0; r < repeats; ++r) {
      for (const auto& [stage, secs] : RunOnce(**geo, tmpl, keep, prefault, pool.get(), &region)) runs[stage].push_back(secs);
    }
    std::fprintf(stderr, "keep=%s, prefault %d, %d threads, medians of %d (s per frame):\n", name,
                 prefault ? 1 : 0, nthreads, repeats);
    std::printf(", \"%s\": {", name);
    bool first = true;
    for (const auto& [stage, v] : runs) {
      std::fprintf(stderr, "  %-22s %8.4f\n", stage.c_str(), Median(v));
      std::printf("%s\"%s\": %.5f", first ? "" : ", ", stage.c_str(), Median(v));
      first = false;
    }
    std::printf("}");
  }
  std::printf("}\n");
  return 0;
}
