// Whole-frame benchmark of the CUDA backend (issue 4): a full 500-fibre r frame is
// generated on the machine that runs it (core/simulator.h: Poisson noise, sky lines;
// --synthetic: tests/cuda/synthetic_frame.h instead), extracted once
// cold (spots evaluated) and then N times warm; reports the median and p90 wall time of
// Backend::Extract, the per-stage breakdown (CUDA events, summed over batches), the
// throughput with several frames in flight (one backend per thread), and optionally a
// CPU-backend parity check on a few bundles. JSON on stdout (or --json FILE).
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

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/geometry.h"
#include "core/preproc.h"
#include "core/psf.h"
#include "core/simulator.h"
#include "tests/cuda/synthetic_frame.h"
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
  bool synthetic = false;
  std::string psf, json, compat = "gpu", check_bundles = "0,19";
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
    else if (k == "--json") a.json = next();
    else if (k == "--compat") a.compat = next();
    else if (k == "--check-bundles") a.check_bundles = next();
    else if (k == "--synthetic") a.synthetic = true;
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  namespace core = spexd::core;
  const Args args = Parse(argc, argv);
  std::string psf_path = args.psf;
  if (psf_path.empty()) psf_path = spexd::testing::SharedDataPath("psf/psf-r0-00051060.fits");
  if (psf_path.empty()) psf_path = "tests/data/psf-r0-00051060.fits";
  auto psf = core::Psf::Load(psf_path);
  if (!psf.ok()) {
    std::cerr << psf.status() << "\n";
    return 1;
  }
  core::ExtractionParams p;  // r-camera defaults: 5760,7620,0.8, 25/5/50, pads 10/0.2/0.8
  p.nspec = args.nspec;
  if (!core::ParseCompat(args.compat, &p.compat)) return 2;
  auto geo = core::Geometry::Create(std::make_shared<const core::Psf>(std::move(psf).value()), p,
                                    4128, 4114, /*cache_spots=*/false);
  if (!geo.ok()) {
    std::cerr << geo.status() << "\n";
    return 1;
  }
  const double tg = Now();
  core::PreprocImage image;
  if (args.synthetic) {
    spexd::testing::SyntheticOptions so;
    image = spexd::testing::MakeSyntheticFrame(**geo, so);
  } else {
    core::SimOptions sim;
    sim.fiber_begin = p.specmin;
    sim.nfibers = p.nspec;
    sim.seed = 7;
    auto spectra = core::GenerateSpectra(sim);
    auto frame = spectra.ok() ? core::SimulateFrame((*geo)->psf(), *spectra, sim)
                              : absl::StatusOr<core::SimFrame>(spectra.status());
    if (!frame.ok()) {
      std::cerr << "simulate: " << frame.status() << "\n";
      return 1;
    }
    image.height = frame->height;
    image.width = frame->width;
    image.image.assign(frame->image.begin(), frame->image.end());
    image.ivar.assign(frame->ivar.begin(), frame->ivar.end());
    std::vector<uint16_t> mask(frame->mask.begin(), frame->mask.end());
    core::ApplyPixelRules(mask.data(), core::MaskPolicy::kDesispec, &image);
  }
  const double gen_seconds = Now() - tg;

  absl::StatusOr<core::BackendOptions> env_options = spexd::testing::CudaOptionsFromEnv();
  if (!env_options.ok()) {
    std::cerr << env_options.status() << "\n";
    return 2;
  }
  const core::BackendOptions bo = *env_options;
  auto backend = core::CreateBackend(bo);
  if (!backend.ok()) {
    std::cout << "{\"skipped\": \"" << Escape(backend.status().ToString()) << "\"}\n";
    return 0;
  }
  core::ExtractionJob job;
  job.geometry = *geo;
  job.image = &image;
  std::vector<BundleResult> last;
  auto run = [&](core::Backend& b, std::vector<BundleResult>* keep) {
    std::vector<BundleResult> out;
    auto s = b.Extract(job, [&](BundleResult&& r) {
      out.push_back(std::move(r));
      return absl::OkStatus();
    });
    if (keep != nullptr) *keep = std::move(out);
    return s;
  };
  const double tc = Now();
  auto cold = run(**backend, nullptr);
  const double cold_seconds = Now() - tc;
  if (!cold.ok()) {
    std::cerr << "cold run failed: " << cold.status() << "\n";
    return 1;
  }
  std::vector<double> totals;
  std::map<std::string, std::vector<double>> stages;
  core::PatchCounts counts;
  for (int r = 0; r < args.runs; ++r) {
    auto s = run(**backend, r + 1 == args.runs ? &last : nullptr);
    if (!s.ok()) {
      std::cerr << "run failed: " << s.status() << "\n";
      return 1;
    }
    totals.push_back(s->seconds);
    for (const auto& [k, v] : s->stage_seconds) stages[k].push_back(v);
    counts = s->counts;
  }
  // Several frames in flight: one backend (context, stream, workspace) per thread.
  double inflight_fps = 0;
  if (args.inflight > 1) {
    std::vector<std::unique_ptr<core::Backend>> pool;
    for (int t = 0; t < args.inflight; ++t) {
      auto b = core::CreateBackend(bo);
      if (!b.ok()) break;
      if (!run(**b, nullptr).ok()) break;  // warm
      pool.push_back(std::move(b).value());
    }
    if (static_cast<int>(pool.size()) == args.inflight) {
      const double t0 = Now();
      std::vector<std::thread> threads;
      for (auto& b : pool) {
        threads.emplace_back([&, bp = b.get()] {
          for (int f = 0; f < args.inflight_frames; ++f) (void)run(*bp, nullptr);
        });
      }
      for (auto& th : threads) th.join();
      inflight_fps = args.inflight * args.inflight_frames / (Now() - t0);
    }
  }
  // CPU parity on a few bundles of the last warm run.
  std::ostringstream check;
  if (!args.check_bundles.empty()) {
    std::vector<int> bundles;
    std::stringstream ss(args.check_bundles);
    for (std::string tok; std::getline(ss, tok, ',');) bundles.push_back(std::atoi(tok.c_str()));
    core::ExtractionJob cj = job;
    cj.bundles = bundles;
    std::vector<BundleResult> ref;
    auto cpu = core::CreateCpuBackend(0);
    const double t0 = Now();
    auto s = cpu->Extract(cj, [&](BundleResult&& r) {
      ref.push_back(std::move(r));
      return absl::OkStatus();
    });
    const double cpu_seconds = Now() - t0;
    double dflux = 0, divar = 0, drd = 0, dpm = 0, dchi = 0;
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
          divar = std::max(divar, std::fabs(r.ivar[i] - g.ivar[i]) / std::max(im, 1e-300));
          dpm = std::max(dpm, std::fabs(r.pixmask_fraction[i] - g.pixmask_fraction[i]));
          const double cm = std::max(std::fabs(r.chi2pix[i]), std::fabs(g.chi2pix[i]));
          dchi = std::max(dchi, std::fabs(r.chi2pix[i] - g.chi2pix[i]) / std::max(cm, 1e-300));
        }
      }
      for (std::size_t j = 0; j < r.rdiags.size(); ++j) drd = std::max(drd, std::fabs(r.rdiags[j] - g.rdiags[j]));
    }
    check << ", \"cpu_check\": {\"ok\": " << (s.ok() ? "true" : "false") << ", \"bundles\": \""
          << args.check_bundles << "\", \"cpu_seconds\": " << cpu_seconds << ", \"flux\": " << dflux
          << ", \"ivar\": " << divar << ", \"rdiag\": " << drd << ", \"pixmask\": " << dpm
          << ", \"chi2pix\": " << dchi << "}";
  }
  const double med = Quantile(totals, 0.5);
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::ostringstream js;
  js.precision(6);
  js << "{\n  \"benchmark\": \"cuda_frame\", \"date\": \"" << date << "\",\n  \"device\": \""
     << Escape((*backend)->description()) << "\",\n  \"driver\": \""
     << Escape(ReadFirstLine("/proc/driver/nvidia/version")) << "\",\n  \"git_sha\": \""
     << Escape(std::getenv("SPEXD_GIT_SHA") != nullptr ? std::getenv("SPEXD_GIT_SHA") : "") << "\",\n"
     << "  \"frame\": {\"nspec\": " << p.nspec << ", \"nwave\": " << (*geo)->plan().nwave
     << ", \"patches\": " << (*geo)->plan().patches.size() << ", \"compat\": \"" << args.compat
     << "\", \"input\": \"" << (args.synthetic ? "synthetic" : "core simulator, Poisson, seed 7")
     << "\", \"generate_seconds\": " << gen_seconds << "},\n"
     << "  \"cold_seconds\": " << cold_seconds << ", \"runs\": " << args.runs
     << ", \"median_seconds\": " << med << ", \"p90_seconds\": " << Quantile(totals, 0.9)
     << ", \"min_seconds\": " << Quantile(totals, 0.0) << ",\n"
     << "  \"patches_per_second\": " << (med > 0 ? static_cast<double>(counts.extracted) / med : 0)
     << ", \"frames_per_hour\": " << (med > 0 ? 3600.0 / med : 0)
     << ", \"inflight\": " << args.inflight << ", \"inflight_frames_per_second\": " << inflight_fps << ",\n"
     << "  \"counts\": {\"extracted\": " << counts.extracted << ", \"skipped\": " << counts.skipped
     << ", \"retried\": " << counts.retried << ", \"failed\": " << counts.failed << "},\n"
     << "  \"stage_median_seconds\": {";
  bool first = true;
  for (const auto& [k, v] : stages) {
    js << (first ? "" : ", ") << "\"" << k << "\": " << Quantile(v, 0.5);
    first = false;
  }
  js << "}" << check.str() << "\n}\n";
  if (!args.json.empty()) {
    std::ofstream(args.json) << js.str();
  }
  std::cout << js.str();
  return 0;
}
