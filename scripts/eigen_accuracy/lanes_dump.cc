// BLOCKS.bin -> OUT.eig: every dumped block through the CPU backend's LaneEigen, written
// as dump_blocks.patch's DumpBlockEigen writes the backend's own, for cpu_eigen_accuracy.py without
// rebuilding a patched backend. Build (flags as core/CMakeLists.txt gives lane_eigen.cc):
//   g++ -O2 -std=c++20 -march=native -ffp-contract=fast -fno-math-errno -Wno-psabi -I. \
//     scripts/eigen_accuracy/lanes_dump.cc core/cpu/internal/lane_eigen.cc -o /tmp/lanes_dump
//   /tmp/lanes_dump BLOCKS.bin LANES.bin.eig   (LANES.bin: a link to BLOCKS.bin)
#include <algorithm>
#include <cstdio>
#include <vector>
#include "core/cpu/internal/lane_eigen.h"
using spexd::core::internal::LaneEigen;
int main(int argc, char** argv) {
  FILE* in = std::fopen(argv[1], "rb");
  FILE* out = std::fopen(argv[2], "wb");
  std::vector<std::vector<double>> blocks;
  int n = 0;
  for (;;) {
    double head[4];
    if (std::fread(head, sizeof(double), 4, in) != 4) break;
    n = static_cast<int>(head[0]);
    std::vector<double> c(static_cast<size_t>(n) * n), x(n);
    std::fread(c.data(), sizeof(double), c.size(), in);
    std::fread(x.data(), sizeof(double), x.size(), in);
    blocks.push_back(c);
  }
  LaneEigen le(n);
  const int L = le.lanes();
  std::vector<double> vals(n), vecs(static_cast<size_t>(n) * n), rec(2 + 3 * n - 1 + n * n);
  int failed = 0;
  for (size_t k = 0; k < blocks.size(); k += L) {
    const int count = static_cast<int>(std::min<size_t>(L, blocks.size() - k));
    const double* src[8];
    for (int l = 0; l < count; ++l) src[l] = blocks[k + l].data();
    le.Load(src, n, count);
    const unsigned ok = le.Decompose();
    for (int l = 0; l < count; ++l) {
      le.Export(l, vals.data(), vecs.data());
      double* p = rec.data();
      *p++ = n;
      *p++ = (ok >> l & 1u) ? 1 : 0;
      failed += !(ok >> l & 1u);
      for (int i = 0; i < n; ++i) *p++ = src[l][i * n + i];
      for (int i = 0; i + 1 < n; ++i) *p++ = src[l][i * n + i + 1];
      for (int i = 0; i < n; ++i) *p++ = vals[i];
      for (double v : vecs) *p++ = v;
      std::fwrite(rec.data(), sizeof(double), rec.size(), out);
    }
  }
  std::fprintf(stderr, "%zu blocks, %d lanes, %d failed\n", blocks.size(), L, failed);
}
