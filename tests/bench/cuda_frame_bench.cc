// Whole-frame benchmark of the CUDA backend: a full 500-fibre frame of any
// camera (--psf, the r0 PSF by default; the image is the PSF's CCD, NPIX_Y x NPIX_X;
// --wavelength wmin,wmax,dw and --psferr default to the DESI production settings of the
// PSF's arm, core/plan/desi_cameras.h) is
// generated on the machine that runs it (core/sim/simulator.h: Poisson noise, sky lines;
// --synthetic: tests/synthetic_frames.h instead), extracted once
// cold (spots evaluated) and then N times warm; reports each warm run's wall time of
// Backend::Extract with their median and p90, the per-stage breakdown (CUDA events,
// summed over batches), the throughput with several frames in flight (one backend per
// thread), the backend's GPU
// memory (device_bytes), and optionally a CPU-backend parity check on a few bundles (each
// array's largest deviation of its fibre's maximum; ivar_at: where ivar's is). JSON on
// stdout (or --json FILE). --model asks
// for the model image; --dump FILE writes the last warm run's outputs as raw bytes, so that
// two builds' outputs can be compared bit for bit (cmp).
// --planes pinned32 (the default) hands the backend what the server decodes a preproc
// file into: float32 planes in pooled host memory pinned by Backend::PlanePinner;
// --planes float64 the simulator's float64 planes (narrowed into the backend's staging).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "bench_build_info.h"  // generated: SPEXD_BENCH_GIT_SHA
#include "core/backend/backend.h"
#include "core/cpu/blas_core_type.h"
#include "core/cpu/cpu_backend.h"
#include "core/plan/desi_cameras.h"
#include "core/plan/geometry.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/sim/simulator.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace {

using spexd::core::BundleResult;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += (c == '\n' || c == '\t') ? ' ' : c;
  }
  return o;
}

struct Args {
  int runs = 7, inflight = 2, inflight_frames = 3, nspec = 500;
  bool has_wavelength = false;  // else the PSF arm's DESI grid
  double wmin = 0, wmax = 0, dw = 0;
  double psferr = -1;  // < 0: the PSF arm's DESI psferr
  bool synthetic = false, model = false;
  std::string psf, json, dump, compat = "gpu", check_bundles = "0,19", planes = "pinned32";
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--runs") a.runs = std::atoi(next().c_str());
    else if (k == "--inflight") a.inflight = std::atoi(next().c_str());
    else if (k == "--inflight-frames") a.inflight_frames = std::atoi(next().c_str());
    else if (k == "--nspec") a.nspec = std::atoi(next().c_str());
    else if (k == "--psf") a.psf = next();
    else if (k == "--wavelength") {
      const std::string v = next();
      if (std::sscanf(v.c_str(), "%lf,%lf,%lf", &a.wmin, &a.wmax, &a.dw) != 3) {
        std::fprintf(stderr, "--wavelength must be wmin,wmax,dw (got '%s')\n", v.c_str());
        std::exit(2);
      }
      a.has_wavelength = true;
    }
    else if (k == "--psferr") a.psferr = std::atof(next().c_str());
    else if (k == "--json") a.json = next();
    else if (k == "--compat") a.compat = next();
    else if (k == "--check-bundles") a.check_bundles = next();
    else if (k == "--synthetic") a.synthetic = true;
    else if (k == "--planes") a.planes = next();
    else if (k == "--model") a.model = true;
    else if (k == "--dump") a.dump = next();
  }
  return a;
}

namespace core = spexd::core;

absl::StatusOr<std::shared_ptr<const core::Geometry>> MakeGeometry(const Args& args,
                                                                   core::ExtractionParams* p) {
  // Relative to the working directory, as spexd_cpu_frame_bench's: no path of the build
  // machine is compiled in, so a device bundle runs anywhere.
  std::string psf_path = args.psf;
  if (psf_path.empty()) psf_path = "tests/data/psf-r0-00051060.fits";
  auto psf = core::Psf::Load(psf_path);
  if (!psf.ok()) return psf.status();
  p->nspec = args.nspec;  // DESI's defaults: 25/5/50, pads 10/0.2/0.8
  absl::StatusOr<core::DesiArm> arm = core::DesiArmForPsf(*psf);
  if (!arm.ok() && (!args.has_wavelength || args.psferr < 0)) return arm.status();
  p->wmin = args.has_wavelength ? args.wmin : arm->wmin;
  p->wmax = args.has_wavelength ? args.wmax : arm->wmax;
  p->dw = args.has_wavelength ? args.dw : arm->dw;
  p->psferr = args.psferr >= 0 ? args.psferr : arm->psferr;
  if (!core::ParseCompat(args.compat, &p->compat)) {
    return absl::InvalidArgumentError("--compat: gpu or cpu");
  }
  // The image is the CCD the PSF was fitted on: 4096 x 4096 for b, 4128 x 4114 for r, z.
  if (psf->npix_y() <= 0 || psf->npix_x() <= 0) {
    return absl::InvalidArgumentError(psf_path + ": no NPIX_X/NPIX_Y (CCD size) in the PSF");
  }
  const int height = psf->npix_y(), width = psf->npix_x();
  return core::Geometry::Create(std::make_shared<const core::Psf>(*std::move(psf)), *p, height,
                                width, /*cache_spots=*/false);
}

// The input frame: the core simulator's (Poisson noise, sky lines), or --synthetic's.
absl::StatusOr<core::PreprocImage> MakeFrame(const Args& args, const core::Geometry& geo,
                                             const core::ExtractionParams& p) {
  if (args.synthetic) return spexd::testing::MakeSyntheticFrame(geo, spexd::testing::SyntheticOptions{});
  core::SimOptions sim;
  sim.fiber_begin = p.specmin;
  sim.nfibers = p.nspec;
  sim.wmin = p.wmin;
  sim.wmax = p.wmax;
  sim.dw = p.dw;
  sim.seed = 7;
  return spexd::testing::SimulatedImage(geo.psf(), sim);
}

absl::StatusOr<core::ExtractionSummary> Extract(core::Backend& b, const core::ExtractionJob& job,
                                                std::vector<BundleResult>* keep) {
  std::vector<BundleResult> out;
  auto s = b.Extract(job, [&](BundleResult&& r) {
    out.push_back(std::move(r));
    return absl::OkStatus();
  });
  if (keep != nullptr) *keep = std::move(out);
  return s;
}

struct WarmRuns {
  std::vector<double> totals;
  std::map<std::string, std::vector<double>> stages;
  core::PatchCounts counts;
  std::vector<BundleResult> last;  // the last run's bundles
};

absl::StatusOr<WarmRuns> TimeWarmRuns(core::Backend& backend, const core::ExtractionJob& job,
                                      int runs) {
  WarmRuns w;
  for (int r = 0; r < runs; ++r) {
    auto s = Extract(backend, job, r + 1 == runs ? &w.last : nullptr);
    if (!s.ok()) return s.status();
    w.totals.push_back(s->seconds);
    for (const auto& [k, v] : s->stage_seconds) w.stages[k].push_back(v);
    w.counts = s->counts;
  }
  return w;
}

// Several frames in flight: one backend (context, stream, workspace) per thread. 0 when a
// backend cannot be created or warmed.
double InflightFramesPerSecond(const core::BackendOptions& bo, const core::ExtractionJob& job,
                               const Args& args) {
  if (args.inflight <= 1) return 0;
  std::vector<std::unique_ptr<core::Backend>> pool;
  for (int t = 0; t < args.inflight; ++t) {
    auto b = core::CreateBackend(bo);
    if (!b.ok() || !Extract(**b, job, nullptr).ok()) return 0;  // created and warm, or none
    pool.push_back(*std::move(b));
  }
  const double t0 = Now();
  std::vector<std::thread> threads;
  for (auto& b : pool) {
    threads.emplace_back([&, bp = b.get()] {
      for (int f = 0; f < args.inflight_frames; ++f) (void)Extract(*bp, job, nullptr);
    });
  }
  for (auto& th : threads) th.join();
  return args.inflight * args.inflight_frames / (Now() - t0);
}

// CPU parity on a few bundles of the last warm run, as a JSON member (or "").
std::string CpuCheckJson(const core::ExtractionJob& job, const std::vector<BundleResult>& last,
                         const Args& args) {
  if (args.check_bundles.empty()) return "";
  std::vector<int> bundles;
  std::stringstream ss(args.check_bundles);
  for (std::string tok; std::getline(ss, tok, ',');) bundles.push_back(std::atoi(tok.c_str()));
  core::ExtractionJob cj = job;
  cj.bundles = bundles;
  std::vector<BundleResult> ref;
  auto cpu = core::CreateCpuBackend(0);
  const double t0 = Now();
  auto s = Extract(*cpu, cj, &ref);
  const double cpu_seconds = Now() - t0;
  double dflux = 0, divar = 0, drd = 0, dpm = 0, dchi = 0;
  int ivar_at[3] = {-1, -1, -1};  // the largest ivar deviation: bundle, its fibre, wavelength
  for (const BundleResult& r : ref) {
    const BundleResult& g = last[static_cast<std::size_t>(r.bundle)];
    for (int f = 0; f < r.nfibers; ++f) {
      double fm = 0, im = 0;
      for (int w = 0; w < r.nwave; ++w) {
        fm = std::max(fm, std::fabs(r.flux[f * r.nwave + w]));
        im = std::max(im, std::fabs(r.ivar[f * r.nwave + w]));
      }
      for (int w = 0; w < r.nwave; ++w) {
        const std::size_t i = static_cast<std::size_t>(f) * r.nwave + w;
        dflux = std::max(dflux, std::fabs(r.flux[i] - g.flux[i]) / std::max(fm, 1e-300));
        const double di = std::fabs(r.ivar[i] - g.ivar[i]) / std::max(im, 1e-300);
        if (di > divar) {
          divar = di;
          ivar_at[0] = r.bundle;
          ivar_at[1] = f;
          ivar_at[2] = w;
        }
        dpm = std::max(dpm, std::fabs(r.pixmask_fraction[i] - g.pixmask_fraction[i]));
        const double cm = std::max(std::fabs(r.chi2pix[i]), std::fabs(g.chi2pix[i]));
        dchi = std::max(dchi, std::fabs(r.chi2pix[i] - g.chi2pix[i]) / std::max(cm, 1e-300));
      }
    }
    for (std::size_t j = 0; j < r.rdiags.size(); ++j) {
      drd = std::max(drd, std::fabs(r.rdiags[j] - g.rdiags[j]));
    }
  }
  std::ostringstream check;
  check << ", \"cpu_check\": {\"ok\": " << (s.ok() ? "true" : "false") << ", \"bundles\": \""
        << args.check_bundles << "\", \"cpu_seconds\": " << cpu_seconds << ", \"flux\": " << dflux
        << ", \"ivar\": " << divar << ", \"rdiag\": " << drd << ", \"pixmask\": " << dpm
        << ", \"chi2pix\": " << dchi << ", \"ivar_at\": {\"bundle\": " << ivar_at[0]
        << ", \"fibre\": " << ivar_at[1] << ", \"wave\": " << ivar_at[2] << "}}";
  return check.str();
}

// Every output array of every bundle, in bundle order, as raw native bytes.
bool DumpOutputs(const std::string& path, const std::vector<BundleResult>& bundles) {
  std::ofstream out(path, std::ios::binary);
  auto put = [&](const auto& v) {
    out.write(reinterpret_cast<const char*>(v.data()),
              static_cast<std::streamsize>(v.size() * sizeof(v[0])));
  };
  for (const BundleResult& r : bundles) {
    const int shape[] = {r.bundle,   r.nfibers,  r.nwave,   r.model_y0,
                         r.model_x0, r.model_ny, r.model_nx};
    out.write(reinterpret_cast<const char*>(shape), sizeof(shape));
    put(r.flux);
    put(r.ivar);
    put(r.rdiags);
    put(r.pixmask_fraction);
    put(r.chi2pix);
    put(r.failed_bins);
    put(r.model);
  }
  return static_cast<bool>(out);
}

struct Report {
  std::string device;
  const core::PatchPlan* plan = nullptr;
  double gen_seconds = 0, cold_seconds = 0, inflight_fps = 0, psferr = 0;
  int64_t device_bytes = 0;  // the backend's GPU memory after the warm runs
  std::string cpu_check;
};

std::string ReportJson(const Args& args, const Report& rep, const WarmRuns& w) {
  const double med = Quantile(w.totals, 0.5);
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::ostringstream js;
  js.precision(6);
  js << "{\n  \"benchmark\": \"cuda_frame\", \"date\": \"" << date << "\",\n  \"device\": \""
     << Escape(rep.device) << "\",\n  \"driver\": \""
     << Escape(ReadFirstLine("/proc/driver/nvidia/version")) << "\",\n  \"git_sha\": \""
     << Escape(std::getenv("SPEXD_GIT_SHA") != nullptr ? std::getenv("SPEXD_GIT_SHA") : SPEXD_BENCH_GIT_SHA)
     << "\",\n"
     << "  \"frame\": {\"psf\": \"" << Escape(args.psf) << "\", \"ccd\": [" << rep.plan->image_height
     << ", " << rep.plan->image_width << "], \"wavelength\": [" << rep.plan->wave.front() << ", "
     << rep.plan->wave.back() << "], \"psferr\": " << rep.psferr
     << ", \"nspec\": " << rep.plan->nspec << ", \"nwave\": " << rep.plan->nwave
     << ", \"patches\": " << rep.plan->patches.size() << ", \"compat\": \"" << args.compat
     << "\", \"input\": \"" << (args.synthetic ? "synthetic" : "core simulator, Poisson, seed 7")
     << "\", \"planes\": \"" << args.planes
     << "\", \"generate_seconds\": " << rep.gen_seconds << "},\n"
     << "  \"cold_seconds\": " << rep.cold_seconds << ", \"runs\": " << args.runs
     << ", \"median_seconds\": " << med << ", \"p90_seconds\": " << Quantile(w.totals, 0.9)
     << ", \"min_seconds\": " << Quantile(w.totals, 0.0) << ",\n"
     // The warm runs' times in run order: a median hides a frame time that takes two
     // values from run to run (the b frame's GPU end does, by about 1 ms).
     << "  \"run_seconds\": [" << absl::StrJoin(w.totals, ", ") << "],\n"
     << "  \"patches_per_second\": " << (med > 0 ? static_cast<double>(w.counts.extracted) / med : 0)
     << ", \"frames_per_hour\": " << (med > 0 ? 3600.0 / med : 0)
     << ", \"inflight\": " << args.inflight << ", \"inflight_frames_per_second\": "
     << rep.inflight_fps << ", \"device_bytes\": " << rep.device_bytes << ",\n"
     << "  \"counts\": {\"extracted\": " << w.counts.extracted << ", \"skipped\": "
     << w.counts.skipped << ", \"retried\": " << w.counts.retried << ", \"failed\": "
     << w.counts.failed << "},\n"
     << "  \"stage_median_seconds\": {";
  bool first = true;
  for (const auto& [k, v] : w.stages) {
    js << (first ? "" : ", ") << "\"" << k << "\": " << Quantile(v, 0.5);
    first = false;
  }
  js << "}" << rep.cpu_check << "\n}\n";
  return js.str();
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);  // the CPU check of bundles
  const Args args = Parse(argc, argv);
  core::ExtractionParams p;
  auto geo = MakeGeometry(args, &p);
  if (!geo.ok()) {
    std::cerr << geo.status() << "\n";
    return 1;
  }
  const double tg = Now();
  absl::StatusOr<core::PreprocImage> image = MakeFrame(args, **geo, p);
  if (!image.ok()) {
    std::cerr << "simulate: " << image.status() << "\n";
    return 1;
  }
  Report rep;
  rep.gen_seconds = Now() - tg;
  rep.plan = &(*geo)->plan();
  rep.psferr = *p.psferr;

  absl::StatusOr<core::BackendOptions> bo = spexd::testing::CudaTestOptions();
  if (!bo.ok()) {
    std::cerr << bo.status() << "\n";
    return 2;
  }
  auto backend = core::CreateBackend(*bo);
  if (!backend.ok()) {
    std::cout << "{\"skipped\": \"" << Escape(backend.status().ToString()) << "\"}\n";
    return 0;
  }
  rep.device = (*backend)->description();
  core::ExtractionJob job;
  job.geometry = *geo;
  job.image = &*image;
  job.want_model = args.model;
  job.psferr = *p.psferr;
  const core::ExtractionJob job64 = job;  // the CPU check's (float64 planes only)
  core::PlaneBufferPool pool(int64_t{1} << 30);
  core::PreprocImage image32;
  if (args.planes == "pinned32") {
    pool.set_pinner((*backend)->gpu()->PlanePinner());
    bool exact = false;
    image32 = spexd::testing::Float32Planes(*image, &pool, &exact);
    if (!exact) {
      // The simulator's values are whole counts: float32 holds them exactly.
      std::cerr << "--planes pinned32: the frame is not exact in float32\n";
      return 1;
    }
    job.image = &image32;
  } else if (args.planes != "float64") {
    std::cerr << "--planes: pinned32 or float64\n";
    return 1;
  }
  const double tc = Now();
  auto cold = Extract(**backend, job, nullptr);
  rep.cold_seconds = Now() - tc;
  if (!cold.ok()) {
    std::cerr << "cold run failed: " << cold.status() << "\n";
    return 1;
  }
  auto warm = TimeWarmRuns(**backend, job, args.runs);
  if (!warm.ok()) {
    std::cerr << "run failed: " << warm.status() << "\n";
    return 1;
  }
  rep.device_bytes = (*backend)->Memory().device_bytes;
  if (!args.dump.empty() && !DumpOutputs(args.dump, warm->last)) {
    std::cerr << "cannot write " << args.dump << "\n";
    return 1;
  }
  rep.inflight_fps = InflightFramesPerSecond(*bo, job, args);
  rep.cpu_check = CpuCheckJson(job64, warm->last, args);
  const std::string js = ReportJson(args, rep, *warm);
  if (!args.json.empty()) std::ofstream(args.json) << js;
  std::cout << js;
  return 0;
}
