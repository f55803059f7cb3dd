// Benchmark: a full r frame (500 fibres x 2326 wavelengths by default) from the simulator
// through the CPU backend. Reports seconds per frame, patches per second and where the
// time goes, as JSON on stdout (human summary on stderr), with the process's CPU time per
// warm frame (user + system, getrusage): on a shared machine a steadier A/B than wall time.
//
//   spexd_cpu_frame_bench [--psf PSF.fits] [--wavelength wmin,wmax,dw] [--fibers N]
//                         [--repeats R] [--threads T] [--compat gpu|cpu]
//                         [--dump FILE] [--compare FILE]
//
// --dump writes the last frame's flux, ivar, resolution, chi2pix and pixmask_fraction as raw
// float64; --compare reads such a file (same flags) and prints how far this build's frame
// is from it, per array: the A/B check of a numerical change (stderr, and JSON "compare").
// --psf defaults to tests/data/psf-r0-00051060.fits relative to the working directory
// (the repository root); no build-machine path is compiled in, so a device bundle runs it
// anywhere with --psf. The image is the PSF's CCD; --wavelength defaults to the DESI grid
// of the PSF's arm (r: 5760,7620,0.8; b, z: core/plan/desi_cameras.h) and psferr to its.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench_build_info.h"  // generated: SPEXD_BENCH_GIT_SHA
#include "core/cpu/blas_core_type.h"
#include "core/cpu/cpu_backend.h"
#include "core/backend/extract_frame.h"
#include "core/base/prefault.h"
#include "core/plan/desi_cameras.h"
#include "core/plan/geometry.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/sim/simulator.h"
#include "tests/test_support.h"

namespace {

using spexd::core::Compat;

struct Args {
  int fibers = 500;
  int repeats = 1;
  int threads = 0;
  Compat compat = Compat::kGpu;
  std::string psf = "tests/data/psf-r0-00051060.fits";
  double wmin = 5760.0, wmax = 7620.0, dw = 0.8;
  bool has_wavelength = false;  // else the DESI grid of the PSF's arm (desi_cameras.h)
  std::string dump, compare;
};

// Flags as "--name value" pairs; false (with a message) on an unknown flag or a bad value.
bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; i += 2) {
    std::string k = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", k.c_str());
      return false;
    }
    const char* v = argv[i + 1];
    if (k == "--fibers") a->fibers = std::atoi(v);
    else if (k == "--repeats") a->repeats = std::atoi(v);
    else if (k == "--threads") a->threads = std::atoi(v);
    else if (k == "--compat") a->compat = std::strcmp(v, "cpu") == 0 ? Compat::kCpu : Compat::kGpu;
    else if (k == "--psf") a->psf = v;
    else if (k == "--dump") a->dump = v;
    else if (k == "--compare") a->compare = v;
    else if (k == "--wavelength") {
      if (std::sscanf(v, "%lf,%lf,%lf", &a->wmin, &a->wmax, &a->dw) != 3) {
        std::fprintf(stderr, "--wavelength must be wmin,wmax,dw (got '%s')\n", v);
        return false;
      }
      a->has_wavelength = true;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return false;
    }
  }
  return true;
}

// User + system CPU seconds of the whole process so far.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Timings {
  spexd::core::ExtractionSummary cold, warm;  // the cold run and the last warm one
  double warm_median_seconds = 0;
  double warm_cpu_seconds = 0;  // process CPU time per warm frame (mean)
  // Wall time of the last warm ExtractFrame outside Backend::Extract (image check, frame
  // assembly, finish): serial, so it bounds the scaling with cores.
  double warm_outside_backend_seconds = 0;
  spexd::core::Frame last;  // the last run's frame (for --dump / --compare)
};

// A cold run (evaluates and caches the spots), then `repeats` warm ones.
absl::StatusOr<Timings> TimeRuns(spexd::core::Backend& backend, const spexd::core::ExtractionJob& job,
                                 int repeats) {
  Timings t;
  std::vector<double> warm;
  double cpu_warm = 0;
  for (int r = 0; r <= repeats; ++r) {
    const double c0 = ProcessCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto frame = spexd::core::ExtractFrame(backend, job, {}, r == 0 ? &t.cold : &t.warm);
    const auto t1 = std::chrono::steady_clock::now();
    if (!frame.ok()) return frame.status();
    t.last = *std::move(frame);
    if (r > 0) {
      warm.push_back(Seconds(t0, t1));
      t.warm_outside_backend_seconds = Seconds(t0, t1) - t.warm.seconds;
      cpu_warm += ProcessCpuSeconds() - c0;
    }
    std::fprintf(stderr, "run %d: %.2f s (%s)\n", r, Seconds(t0, t1), r == 0 ? "cold" : "warm");
  }
  std::sort(warm.begin(), warm.end());
  t.warm_median_seconds = warm.empty() ? t.cold.seconds : warm[warm.size() / 2];
  t.warm_cpu_seconds = warm.empty() ? 0 : cpu_warm / static_cast<double>(warm.size());
  return t;
}

// The arrays --dump writes, in this order.
std::vector<std::pair<const char*, const std::vector<double>*>> DumpedArrays(
    const spexd::core::Frame& f) {
  return {{"flux", &f.flux}, {"ivar", &f.ivar}, {"rdiags", &f.rdiags},
          {"chi2pix", &f.chi2pix}, {"pixmask_fraction", &f.pixmask_fraction}};
}

bool Dump(const spexd::core::Frame& f, const std::string& path) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return false;
  bool ok = true;
  for (const auto& [name, v] : DumpedArrays(f)) {
    ok = ok && std::fwrite(v->data(), sizeof(double), v->size(), out) == v->size();
  }
  return std::fclose(out) == 0 && ok;
}

// Per array, the largest |a - b| relative to max(|a|, |b|) over elements, and relative to
// the array's largest |b| (normwise); as a JSON object body. Empty string if unreadable.
std::string Compare(const spexd::core::Frame& f, const std::string& path) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) return "";
  std::string json;
  for (const auto& [name, v] : DumpedArrays(f)) {
    std::vector<double> ref(v->size());
    if (std::fread(ref.data(), sizeof(double), ref.size(), in) != ref.size()) {
      std::fclose(in);
      return "";
    }
    double elem = 0, diff = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double a = (*v)[i], b = ref[i];
      if (std::isnan(a) || std::isnan(b)) {
        if (std::isnan(a) != std::isnan(b)) elem = diff = INFINITY;
        continue;
      }
      const double d = std::fabs(a - b), m = std::max(std::fabs(a), std::fabs(b));
      if (m > 0) elem = std::max(elem, d / m);
      diff = std::max(diff, d);
      scale = std::max(scale, std::fabs(b));
    }
    std::fprintf(stderr, "compare %-16s max rel (elementwise) %.3e  max abs / max|ref| %.3e\n",
                 name, elem, scale > 0 ? diff / scale : diff);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s\n    \"%s\": [%.3e, %.3e]", json.empty() ? "" : ",",
                  name, elem, scale > 0 ? diff / scale : diff);
    json += buf;
  }
  std::fclose(in);
  return json;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

void PrintJson(const Args& args, int nwave, const Timings& t, const std::string& compare) {
  const double median = t.warm_median_seconds;
  const long long patches = static_cast<long long>(t.warm.counts.extracted);
  const char* sha = std::getenv("GIT_SHA");  // else the build's (bench_build_info.h)
  std::printf("{\n  \"benchmark\": \"cpu_frame\",\n  \"fibers\": %d,\n  \"nwave\": %d,\n",
              args.fibers, nwave);
  std::printf("  \"threads\": %d,\n  \"hardware_threads\": %u,\n  \"compat\": \"%s\",\n",
              args.threads, std::thread::hardware_concurrency(),
              spexd::core::CompatName(args.compat));
  std::printf("  \"git_sha\": \"%s\",\n", sha != nullptr ? sha : SPEXD_BENCH_GIT_SHA);
  std::printf("  \"blas\": \"%s\",\n", JsonEscape(spexd::core::BlasCoreReport()).c_str());
  std::printf("  \"psf\": \"%s\",\n  \"wavelength\": [%.6g, %.6g, %.6g],\n",
              JsonEscape(args.psf).c_str(), args.wmin, args.wmax, args.dw);
  std::printf("  \"warm_cpu_seconds\": %.3f,\n", t.warm_cpu_seconds);
  std::printf("  \"warm_backend_seconds\": %.3f,\n", t.warm.seconds);
  std::printf("  \"warm_outside_backend_seconds\": %.3f,\n", t.warm_outside_backend_seconds);
  std::printf("  \"cold_seconds\": %.3f,\n  \"warm_median_seconds\": %.3f,\n", t.cold.seconds,
              median);
  std::printf("  \"patches\": %lld,\n  \"patches_per_second\": %.1f,\n", patches,
              static_cast<double>(patches) / median);
  std::printf("  \"cold_stage_seconds\": {");
  const char* sep = "";
  for (const auto& [k, v] : t.cold.stage_seconds) {
    std::printf("%s\n    \"%s\": %.3f", sep, k.c_str(), v);
    sep = ",";
  }
  std::printf("\n  },\n  \"warm_stage_seconds\": {");
  sep = "";
  for (const auto& [k, v] : t.warm.stage_seconds) {
    std::printf("%s\n    \"%s\": %.3f", sep, k.c_str(), v);
    sep = ",";
  }
  std::printf("\n  }");
  if (!compare.empty()) std::printf(",\n  \"compare\": {%s\n  }", compare.c_str());
  std::printf("\n}\n");
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);
  using namespace spexd::core;
  Args args;
  if (!Parse(argc, argv, &args)) return 2;
  auto psf_or = Psf::Load(args.psf);
  if (!psf_or.ok()) {
    std::fprintf(stderr, "%s (pass --psf)\n", psf_or.status().ToString().c_str());
    return 1;
  }
  auto psf = std::make_shared<const Psf>(std::move(*psf_or));
  std::optional<double> arm_psferr;
  if (!args.has_wavelength) {
    absl::StatusOr<DesiArm> arm = DesiArmForPsf(*psf);
    if (!arm.ok()) {
      std::fprintf(stderr, "%s (pass --wavelength)\n", arm.status().ToString().c_str());
      return 2;
    }
    args.wmin = arm->wmin;
    args.wmax = arm->wmax;
    args.dw = arm->dw;
    arm_psferr = arm->psferr;
  }

  // Input built before the clock starts: a Poisson frame from the simulator.
  SimOptions sim;
  sim.fiber_begin = 0;
  sim.nfibers = args.fibers;
  sim.wmin = args.wmin;
  sim.wmax = args.wmax;
  sim.dw = args.dw;
  sim.seed = 7;
  auto simulated = spexd::testing::SimulatedImage(*psf, sim);
  if (!simulated.ok()) {
    std::fprintf(stderr, "simulate: %s\n", simulated.status().ToString().c_str());
    return 1;
  }
  // The planes in huge pages where the kernel grants them, as the service's are (its
  // PlaneBuffer blocks are madvised): each patch reads its window's rows across the frame.
  PreprocImage image = *std::move(simulated);
  for (std::vector<double>* plane : {&image.image, &image.ivar}) {
    std::vector<double> advised;
    advised.reserve(plane->size());
    AdviseHugePages(advised.data(), plane->size() * sizeof(double));
    advised.assign(plane->begin(), plane->end());
    *plane = std::move(advised);
  }

  ExtractionParams params;
  params.nspec = args.fibers;
  params.compat = args.compat;
  params.wmin = args.wmin;
  params.wmax = args.wmax;
  params.dw = args.dw;
  params.psferr = arm_psferr;
  if (absl::Status v = ValidateParams(params, *psf); !v.ok()) {
    std::fprintf(stderr, "%s\n", v.ToString().c_str());
    return 2;
  }
  auto geo = Geometry::Create(psf, params, image.height, image.width, /*cache_spots=*/true);
  if (!geo.ok()) {
    std::fprintf(stderr, "geometry: %s\n", geo.status().ToString().c_str());
    return 1;
  }
  auto backend = CreateCpuBackend(args.threads);
  ExtractionJob job;
  job.geometry = *geo;
  job.image = &image;
  job.psferr = EffectivePsfErr(params, *psf);

  auto timings = TimeRuns(*backend, job, args.repeats);
  if (!timings.ok()) {
    std::fprintf(stderr, "extract: %s\n", timings.status().ToString().c_str());
    return 1;
  }
  if (!args.dump.empty() && !Dump(timings->last, args.dump)) {
    std::fprintf(stderr, "cannot write %s\n", args.dump.c_str());
    return 1;
  }
  std::string compare;
  if (!args.compare.empty()) {
    compare = Compare(timings->last, args.compare);
    if (compare.empty()) {
      std::fprintf(stderr, "cannot read %s (or its size differs)\n", args.compare.c_str());
      return 1;
    }
  }
  PrintJson(args, (*geo)->plan().nwave, *timings, compare);
  return 0;
}
