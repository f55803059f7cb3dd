#include "tests/bench/rpc_bench_metrics.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace spexd::bench {

void AddTotals(const std::vector<server::ServerMetrics::WorkerWork>& totals, double sign,
               bool procs, GpuWorkMap* out) {
  for (const auto& w : totals) {
    GpuWork& g = (*out)[w.gpu];
    (procs ? g.procs_frames : g.frames) += sign * w.frames;
    (procs ? g.procs_busy_s : g.busy_s) += sign * w.busy_seconds;
  }
}

std::string GpuWorkJson(const GpuWorkMap& work) {
  std::string out;
  for (const auto& [gpu, g] : work) {
    absl::StrAppend(&out, out.empty() ? "" : ",",
                    absl::StrFormat("\"%s\":{\"frames\":%.0f,\"busy_s\":%.3f,\"procs_frames\":%.0f,"
                                    "\"procs_busy_s\":%.3f}",
                                    gpu, g.frames, g.busy_s, g.procs_frames, g.procs_busy_s));
  }
  return "{" + out + "}";
}

std::string ShadowParityJson(double fraction, const std::string& scrape) {
  double ok = 0, drift = 0, skipped = 0;
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    if (!absl::StartsWith(line, "spexd_shadow_parity_checks_total{")) continue;
    const std::size_t sp = line.rfind(' ');
    double v = 0;
    if (sp == absl::string_view::npos || !absl::SimpleAtod(line.substr(sp + 1), &v)) continue;
    if (absl::StrContains(line, "result=\"ok\"")) ok += v;
    if (absl::StrContains(line, "result=\"drift\"")) drift += v;
    if (absl::StrContains(line, "result=\"skipped\"")) skipped += v;
  }
  return absl::StrFormat("{\"fraction\":%g,\"ok\":%.0f,\"drift\":%.0f,\"skipped\":%.0f}", fraction,
                         ok, drift, skipped);
}

}  // namespace spexd::bench
