// The spexd_rpc_bench's helpers: timing and summaries, and its client side: one frame
// through the service as spexctl rebuilds it, and the client processes of --client-procs
// (this binary in client mode), each sending frames back to back.
#ifndef SPEXD_TESTS_BENCH_RPC_BENCH_CLIENTS_H_
#define SPEXD_TESTS_BENCH_RPC_BENCH_CLIENTS_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/lib/spexd_client.h"

namespace spexd::bench {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0);
// Steady clock in seconds: CLOCK_MONOTONIC on Linux, comparable across processes.
double SteadyNow();
// Seconds per frame in steady state: the interval between the first and the last
// completion over the frames completed in between.
double SteadyInterval(std::vector<double> done);

struct Stats {
  double median = 0, p90 = 0;
};
Stats Summarise(std::vector<double> v);

std::string CpuModel();
int Fail(const std::string& what, const absl::Status& s);  // prints; returns 1
std::string GitSha();  // SPEXD_GIT_SHA, or "unknown"

// A full-frame request of `fibers` fibres on the r grid for the server-side frame.
spexd::v1::ExtractHeader MakeHeader(const std::string& psf_id, const std::string& frame_path,
                                    int fibers);
// One extraction through the service, the client-side frame rebuild included.
absl::Status RemoteFrame(spexd::client::SpexdClient& c, const spexd::v1::ExtractHeader& header,
                         spexd::v1::ExtractSummary* summary);

// Client mode: `frames` frames back to back, one line per frame on stdout.
int RunClient(const std::string& target, const std::string& psf_id, const std::string& frame,
              int fibers, int frames);

struct ProcResult {
  absl::Status status;
  std::vector<double> done, seconds, extract, load;
  std::map<std::string, std::vector<double>> stages;  // backend stage seconds, server side
  double start = 0, end = 0;  // steady clock, around the whole run
};

// Starts `procs` client processes (this binary in client mode), each extracting
// `frames_each` frames, waits for them and collects their per-frame lines.
ProcResult RunClientProcesses(int procs, int frames_each, int fibers, const std::string& target,
                              const std::string& psf_id, const std::string& frame_path,
                              const std::string& dir);

}  // namespace spexd::bench

#endif  // SPEXD_TESTS_BENCH_RPC_BENCH_CLIENTS_H_
