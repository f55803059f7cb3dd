// Host cost of a frame's numerical-health summary ("under 1 % of the frame
// time"): core::HealthAccumulator over an r frame's bundles (500 fibres x 2326
// wavelengths in 20 bundles, chi2pix ~ 1 with outliers, some masked and zero-ivar bins),
// both ways the server finishes it: reading the assembled frame in place, and keeping the
// streamed frame's chi2pix. For comparison, ComputeSpecMask on the same frame (what the
// assembler, spexctl and every client already pay). Inputs are built before the clock
// starts; one warm-up, then the median (and p90) of --repeats runs, as JSON; the Add calls
// (spread over the frame's streaming) and Finish (after the last bundle) apart:
//   spexd_health_summary_bench [--repeats N (9)] [--fibers 500] [--nwave 2326]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/frame/frame.h"
#include "core/frame/health_summary.h"

namespace {

using spexd::core::BundleResult;
using spexd::core::Frame;
using spexd::core::HealthAccumulator;

struct Stats {
  double median = 0, p90 = 0;
};

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Stats Summarise(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  return {s[s.size() / 2], s[std::min(s.size() - 1, s.size() * 9 / 10)]};
}

Stats Time(int repeats, const std::function<void()>& run) {
  run();  // warm-up
  std::vector<double> s;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    s.push_back(Seconds(t0));
  }
  return Summarise(s);
}

// The bundles' Add calls (spread over the frame's streaming) and Finish (after the last
// bundle, before the summary goes out), timed apart.
struct Split {
  Stats add, finish;
};
Split TimeSplit(int repeats, const std::function<HealthAccumulator()>& make,
                const std::vector<BundleResult>& bundles, const Frame* assembled, double* sink) {
  std::vector<double> add, finish;
  for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up
    HealthAccumulator acc = make();
    const auto t0 = std::chrono::steady_clock::now();
    for (const BundleResult& b : bundles) acc.Add(b);
    const double a = Seconds(t0);
    const auto t1 = std::chrono::steady_clock::now();
    const spexd::core::FrameHealth h = acc.Finish(assembled);
    const double f = Seconds(t1);
    *sink += h.median_chi2pix + static_cast<double>(h.bad2dfit);
    if (r >= 0) {
      add.push_back(a);
      finish.push_back(f);
    }
  }
  return {Summarise(add), Summarise(finish)};
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 9, fibers = 500, nwave = 2326;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--fibers")) fibers = std::max(25, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--nwave")) nwave = std::max(2, std::atoi(argv[i + 1]));
  }
  const int per_bundle = 25, nbundles = fibers / per_bundle;
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::gamma_distribution<double> chi2(5.0, 0.2);
  std::vector<BundleResult> bundles(static_cast<std::size_t>(nbundles));
  Frame frame;
  frame.nspec = nbundles * per_bundle;
  frame.nwave = nwave;
  for (int k = 0; k < nbundles; ++k) {
    BundleResult& b = bundles[static_cast<std::size_t>(k)];
    b.Allocate(k, k * per_bundle, per_bundle, nwave, 5);
    for (std::size_t i = 0; i < b.chi2pix.size(); ++i) {
      b.chi2pix[i] = chi2(rng) + (u(rng) < 0.002 ? 50 * u(rng) : 0.0);
      b.ivar[i] = u(rng) < 0.01 ? 0.0 : 1.0 + u(rng);
      b.pixmask_fraction[i] = u(rng) < 0.01 ? 1.0 : 0.0;
    }
    b.patch_condition.assign(235, 600.0);
    frame.chi2pix.insert(frame.chi2pix.end(), b.chi2pix.begin(), b.chi2pix.end());
    frame.ivar.insert(frame.ivar.end(), b.ivar.begin(), b.ivar.end());
    frame.pixmask_fraction.insert(frame.pixmask_fraction.end(), b.pixmask_fraction.begin(),
                                  b.pixmask_fraction.end());
    frame.failed_bins.insert(frame.failed_bins.end(), b.failed_bins.begin(), b.failed_bins.end());
  }
  spexd::core::ComputeSpecMask(&frame);
  const std::size_t bins = static_cast<std::size_t>(frame.nspec) * nwave;

  double sink = 0;
  const Split assembled = TimeSplit(repeats, [] { return HealthAccumulator(false); }, bundles,
                                    &frame, &sink);
  const Split streamed = TimeSplit(
      repeats, [bins] { return HealthAccumulator(true, spexd::core::MaskPolicy::kDesispec, bins); },
      bundles, nullptr, &sink);
  Frame copy = frame;
  const Stats specmask = Time(repeats, [&] {
    spexd::core::ComputeSpecMask(&copy);
    sink += copy.mask[0];
  });
  // *_s: Add over all bundles plus Finish (medians); *_finish_s: Finish alone.
  std::printf(
      "{\"bench\":\"health_summary\",\"fibers\":%d,\"nwave\":%d,\"repeats\":%d,"
      "\"assembled_s\":{\"median\":%.5f},\"assembled_finish_s\":{\"median\":%.5f,\"p90\":%.5f},"
      "\"streamed_s\":{\"median\":%.5f},\"streamed_finish_s\":{\"median\":%.5f,\"p90\":%.5f},"
      "\"compute_spec_mask_s\":{\"median\":%.5f,\"p90\":%.5f},\"checksum\":%g}\n",
      frame.nspec, nwave, repeats, assembled.add.median + assembled.finish.median,
      assembled.finish.median, assembled.finish.p90, streamed.add.median + streamed.finish.median,
      streamed.finish.median, streamed.finish.p90, specmask.median, specmask.p90, sink);
  return 0;
}
