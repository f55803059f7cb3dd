// The spexd_rpc_bench's reading of spexd's metrics: each GPU's work from the per-worker
// counters, and the shadow parity checks from a scrape, as JSON fragments.
#ifndef SPEXD_TESTS_BENCH_RPC_BENCH_METRICS_H_
#define SPEXD_TESTS_BENCH_RPC_BENCH_METRICS_H_

#include <map>
#include <string>
#include <vector>

#include "server/platform/metrics.h"

namespace spexd::bench {

// Each GPU's work from spexd's per-worker metrics (spexd_worker_frames_total and
// spexd_worker_busy_seconds_total, summed over the workers of a GPU).
struct GpuWork {
  double frames = 0, busy_s = 0;            // the whole service run
  double procs_frames = 0, procs_busy_s = 0;  // during the client processes
};
using GpuWorkMap = std::map<std::string, GpuWork>;

// Adds `sign` x the totals to each GPU's whole-run or client-process figures.
void AddTotals(const std::vector<server::ServerMetrics::WorkerWork>& totals, double sign,
               bool procs, GpuWorkMap* out);
std::string GpuWorkJson(const GpuWorkMap& work);

// Shadow parity checks by result, summed over the other labels, from a scrape of the
// server's registry: {"fraction":F,"ok":N,"drift":N,"skipped":N}.
std::string ShadowParityJson(double fraction, const std::string& scrape);

}  // namespace spexd::bench

#endif  // SPEXD_TESTS_BENCH_RPC_BENCH_METRICS_H_
