// Reads SPEXD_DUMP_BLOCKS records, runs the GPU's serial reduction + QlValues, writes
// per block: d0 (n), e0 (n), lambda (n), H (n*n column-major). A third argument
// "reverse": QlValues on T oriented (OrientForQl: reversed where |d_end| < |d_0|, dsterf's
// QR choice), as the GPU's twisted path does.
#include <cmath>
#include <cstdio>
#include <vector>
#include "core/numerics/tridiag_eigen.h"
using namespace spexd::core::tridiag;
int main(int argc, char** argv) {
  FILE* in = std::fopen(argv[1], "rb");
  FILE* out = std::fopen(argv[2], "wb");
  int count = 0;
  for (;;) {
    double head[4];
    if (std::fread(head, sizeof(double), 4, in) != 4) break;
    const int n = static_cast<int>(head[0]), lda = n + 1;
    std::vector<double> c(static_cast<size_t>(n) * n), x(n);
    std::fread(c.data(), sizeof(double), c.size(), in);
    std::fread(x.data(), sizeof(double), x.size(), in);
    std::vector<double> s(static_cast<size_t>(lda) * n), d(n), e(n), tau(n), v(n), w(n);
    for (int col = 0; col < n; ++col)
      for (int r = 0; r < n; ++r) s[col * lda + r] = c[col * n + r];
    double scalar = 0;
    SerialTeam t;
    HouseholderTridiagonalize(t, s.data(), lda, n, d.data(), e.data(), tau.data(), v.data(), w.data(), &scalar);
    FormReflectorProduct(t, s.data(), lda, n, tau.data(), w.data());
    std::vector<double> d0 = d, e0 = e;
    if (argc > 3) OrientForQl(d.data(), e.data(), n);  // as QlKernel<false> does
    const int sweeps = QlValues(d.data(), e.data(), n);
    if (sweeps < 0) std::fprintf(stderr, "block %d: QL failed\n", count);
    std::fwrite(d0.data(), sizeof(double), n, out);
    std::fwrite(e0.data(), sizeof(double), n, out);
    std::fwrite(d.data(), sizeof(double), n, out);
    std::vector<double> h(static_cast<size_t>(n) * n);
    for (int col = 0; col < n; ++col)
      for (int r = 0; r < n; ++r) h[col * n + r] = s[col * lda + r];
    std::fwrite(h.data(), sizeof(double), h.size(), out);
    ++count;
  }
  std::fprintf(stderr, "%d blocks\n", count);
}
