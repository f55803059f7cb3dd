// The host-cost benchmark's JSON record (docs/benchmarks/: benchmark, command, device, date,
// commit, figures), as scripts/perf_table.py reads it.
#ifndef SPEXD_TESTS_BENCH_HOST_COST_RECORD_H_
#define SPEXD_TESTS_BENCH_HOST_COST_RECORD_H_

#include <string>
#include <vector>

namespace spexd::bench {

struct Figure {
  std::string name, label;
  double value;
  std::string unit;
};

// The device a record names when none is given: the host's cores, and the backend.
std::string DefaultDevice(const std::string& backend);

// The record; its commit is $SPEXD_GIT_SHA, else the build's.
std::string HostCostRecord(const std::string& command, const std::string& device,
                           const std::vector<Figure>& figures);

}  // namespace spexd::bench

#endif  // SPEXD_TESTS_BENCH_HOST_COST_RECORD_H_
