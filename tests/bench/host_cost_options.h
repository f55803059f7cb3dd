// The host-cost benchmark's options (host_cost_bench.cc's usage) and its served modes.
#ifndef SPEXD_TESTS_BENCH_HOST_COST_OPTIONS_H_
#define SPEXD_TESTS_BENCH_HOST_COST_OPTIONS_H_

#include <string>
#include <utility>
#include <vector>

namespace spexd::bench {

// What the command line gives (host_cost_bench.cc has the usage).
struct Args {
  std::string backend = "replay";
  std::string psf, frame, frame_gz;
  std::vector<std::pair<std::string, std::string>> arms;  // PSF, preproc .fits
  int petals = 1;
  int clients = 2;
  int frames = 3;
  int nspec = 500;
  int workers = 2;
  std::string modes = "all";
  std::string work;
  std::string spexctl;
  std::string device;
  std::string record;
  std::string replay_dir;    // where the replay's recordings are kept (default: --work)
  std::string timed_marker;  // created while a mode's timed part runs (for a profiler)
  // spexd --shadow_parity_fraction: 0 here, since a sampled check (a CPU extraction of one
  // bundle, ~1 % of frames by default) lands on a few frames of a short run and swamps them.
  double shadow_fraction = 0;
  std::string command;  // the command line, for the record
};

// Reads `--key value` pairs into `a` (and the whole command line, quoted, into
// a->command); false, having said why on stderr, on an unknown key or a missing value.
bool Parse(int argc, char** argv, Args* a);

// A served mode: the input, who writes the frame, and its output form; or an exposure job.
struct Mode {
  std::string name;
  bool gz_in = false, server_writes = false, gz_out = false;
  bool exposure = false;
};

// Every served mode: .fits or .fits.gz in x client- or server-written x .fits or .fits.gz
// out (named like fits_to_server_fits), then the two exposure jobs.
std::vector<Mode> AllModes();

}  // namespace spexd::bench

#endif  // SPEXD_TESTS_BENCH_HOST_COST_OPTIONS_H_
