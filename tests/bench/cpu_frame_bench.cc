// Benchmark: a full r frame (500 fibres x 2326 wavelengths by default) from the simulator
// through the CPU backend. Reports seconds per frame, patches per second and where the
// time goes, as JSON on stdout (human summary on stderr).
//
//   spexd_cpu_frame_bench [--fibers N] [--repeats R] [--threads T] [--compat gpu|cpu]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cpu/cpu_backend.h"
#include "core/backend/extract_frame.h"
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
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--fibers") a.fibers = std::atoi(v);
    else if (k == "--repeats") a.repeats = std::atoi(v);
    else if (k == "--threads") a.threads = std::atoi(v);
    else if (k == "--compat") a.compat = std::strcmp(v, "cpu") == 0 ? Compat::kCpu : Compat::kGpu;
  }
  return a;
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Timings {
  spexd::core::ExtractionSummary cold, warm;  // the cold run and the last warm one
  double warm_median_seconds = 0;
};

// A cold run (evaluates and caches the spots), then `repeats` warm ones.
absl::StatusOr<Timings> TimeRuns(spexd::core::Backend& backend, const spexd::core::ExtractionJob& job,
                                 int repeats) {
  Timings t;
  std::vector<double> warm;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto frame = spexd::core::ExtractFrame(backend, job, {}, r == 0 ? &t.cold : &t.warm);
    const auto t1 = std::chrono::steady_clock::now();
    if (!frame.ok()) return frame.status();
    if (r > 0) warm.push_back(Seconds(t0, t1));
    std::fprintf(stderr, "run %d: %.2f s (%s)\n", r, Seconds(t0, t1), r == 0 ? "cold" : "warm");
  }
  std::sort(warm.begin(), warm.end());
  t.warm_median_seconds = warm.empty() ? t.cold.seconds : warm[warm.size() / 2];
  return t;
}

void PrintJson(const Args& args, int nwave, const Timings& t) {
  const double median = t.warm_median_seconds;
  const long long patches = static_cast<long long>(t.warm.counts.extracted);
  const char* sha = std::getenv("GIT_SHA");
  std::printf("{\n  \"benchmark\": \"cpu_frame\",\n  \"fibers\": %d,\n  \"nwave\": %d,\n",
              args.fibers, nwave);
  std::printf("  \"threads\": %d,\n  \"hardware_threads\": %u,\n  \"compat\": \"%s\",\n",
              args.threads, std::thread::hardware_concurrency(),
              spexd::core::CompatName(args.compat));
  std::printf("  \"git_sha\": \"%s\",\n", sha != nullptr ? sha : "unknown");
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
  std::printf("\n  }\n}\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spexd::core;
  Args args = Parse(argc, argv);
  auto psf_or = Psf::Load(spexd::testing::BundledPsfPath());
  if (!psf_or.ok()) {
    std::fprintf(stderr, "%s\n", psf_or.status().ToString().c_str());
    return 1;
  }
  auto psf = std::make_shared<const Psf>(std::move(*psf_or));

  // Input built before the clock starts: a Poisson frame from the simulator.
  SimOptions sim;
  sim.fiber_begin = 0;
  sim.nfibers = args.fibers;
  sim.seed = 7;
  auto simulated = spexd::testing::SimulatedImage(*psf, sim);
  if (!simulated.ok()) {
    std::fprintf(stderr, "simulate: %s\n", simulated.status().ToString().c_str());
    return 1;
  }
  const PreprocImage image = *std::move(simulated);

  ExtractionParams params;
  params.nspec = args.fibers;
  params.compat = args.compat;
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
  PrintJson(args, (*geo)->plan().nwave, *timings);
  return 0;
}
