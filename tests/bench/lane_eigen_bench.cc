// The CPU decorrelation's eigen-solver alone (core/cpu/internal/lane_eigen.h):
// groups of random symmetric positive definite blocks of the r camera's size, decomposed
// LaneEigen::lanes() at a time, against LAPACK's dsyevd one block at a time.
//
//   spexd_lane_eigen_bench [--n 74] [--groups 200] [--repeats 5] [--lanes 0|4|8]
//                          [--decades 12]
//
// The blocks' eigenvalues spread log-uniformly over --decades decades (the C_ss blocks are
// SPD and often ill-conditioned). Prints JSON: the best of --repeats passes over the
// groups, in microseconds per group and per block, and dsyevd's per block.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/internal/lane_eigen.h"
#include "core/cpu/internal/lapack.h"
#include "tests/random_spd.h"

namespace {

using spexd::core::internal::LaneEigen;
using spexd::testing::RandomSpd;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}


bool Flag(int argc, char** argv, int* i, const char* name, double* value) {
  if (std::strcmp(argv[*i], name) != 0 || *i + 1 >= argc) return false;
  *value = std::atof(argv[++*i]);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  double n_flag = 74, groups_flag = 200, repeats_flag = 5, lanes_flag = 0, decades = 12;
  for (int i = 1; i < argc; ++i) {
    if (!Flag(argc, argv, &i, "--n", &n_flag) && !Flag(argc, argv, &i, "--groups", &groups_flag) &&
        !Flag(argc, argv, &i, "--repeats", &repeats_flag) &&
        !Flag(argc, argv, &i, "--lanes", &lanes_flag) &&
        !Flag(argc, argv, &i, "--decades", &decades)) {
      std::fprintf(stderr, "unknown flag or missing value: %s\n", argv[i]);
      return 2;
    }
  }
  const int n = static_cast<int>(n_flag), groups = static_cast<int>(groups_flag);
  const int repeats = std::max(1, static_cast<int>(repeats_flag));
  if (n < 2 || groups < 1) {
    std::fprintf(stderr, "--n must be >= 2 and --groups >= 1\n");
    return 2;
  }
  spexd::core::UseSingleThreadedBlas();  // dsyevd on this thread only, as in the backend
  LaneEigen eig(n, static_cast<int>(lanes_flag));
  const int lanes = eig.lanes();
  // Sixteen distinct blocks, reused: enough to defeat any shortcut, small enough to stay in
  // cache as the decorrelation's blocks do.
  std::mt19937_64 rng(7);
  std::vector<std::vector<double>> blocks;
  for (int b = 0; b < 16; ++b) blocks.push_back(RandomSpd(n, decades, &rng));

  double best_lanes = 1e30;
  unsigned failed = 0;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = Seconds();
    for (int g = 0; g < groups; ++g) {
      const double* src[LaneEigen::kMaxLanes];
      for (int l = 0; l < lanes; ++l) src[l] = blocks[(g * lanes + l) % blocks.size()].data();
      eig.Load(src, n, lanes);
      const unsigned ok = eig.Decompose();
      failed += static_cast<unsigned>(lanes - __builtin_popcount(ok));
    }
    best_lanes = std::min(best_lanes, Seconds() - t0);
  }

  // dsyevd, one block at a time, on as many blocks.
  int nn = n, info = 0, lwork = -1, liwork = -1, iwq = 0;
  double wq = 0;
  std::vector<double> a(static_cast<std::size_t>(n) * n), w(n);
  dsyevd_("V", "L", &nn, a.data(), &nn, w.data(), &wq, &lwork, &iwq, &liwork, &info, 1, 1);
  lwork = static_cast<int>(wq);
  liwork = iwq;
  std::vector<double> work(static_cast<std::size_t>(lwork));
  std::vector<int> iwork(static_cast<std::size_t>(liwork));
  double best_lapack = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = Seconds();
    for (int g = 0; g < groups; ++g) {
      for (int l = 0; l < lanes; ++l) {
        a = blocks[(g * lanes + l) % blocks.size()];
        dsyevd_("V", "L", &nn, a.data(), &nn, w.data(), work.data(), &lwork, iwork.data(),
                &liwork, &info, 1, 1);
        failed += info != 0;
      }
    }
    best_lapack = std::min(best_lapack, Seconds() - t0);
  }
  const double blocks_done = static_cast<double>(groups) * lanes;
  std::printf(
      "{\n  \"n\": %d,\n  \"lanes\": %d,\n  \"groups\": %d,\n  \"repeats\": %d,\n"
      "  \"lanes_us_per_group\": %.2f,\n  \"lanes_us_per_block\": %.2f,\n"
      "  \"dsyevd_us_per_block\": %.2f,\n  \"failed\": %u\n}\n",
      n, lanes, groups, repeats, best_lanes / groups * 1e6, best_lanes / blocks_done * 1e6,
      best_lapack / blocks_done * 1e6, failed);
  return failed == 0 ? 0 : 1;
}
