// The host-cost benchmark's CPU accounting: this process's and its children's CPU seconds,
// its minor page faults, and its live threads' CPU by role (the names spexd gives them), at
// one moment. Two snapshots around a timed part give its cost.
#ifndef SPEXD_TESTS_BENCH_HOST_CPU_SNAPSHOT_H_
#define SPEXD_TESTS_BENCH_HOST_CPU_SNAPSHOT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "tests/bench/replay_backend.h"

namespace spexd::bench {

struct Snapshot {
  double self = 0, children = 0, replay = 0;
  int64_t faults = 0;  // spexd's minor page faults
  std::map<std::string, double> roles;
  std::chrono::steady_clock::time_point at;
};

// `store`: the replay backend's recordings (its own copies' CPU, reported apart), or null.
Snapshot TakeSnapshot(const ReplayStore* store);

}  // namespace spexd::bench

#endif  // SPEXD_TESTS_BENCH_HOST_CPU_SNAPSHOT_H_
