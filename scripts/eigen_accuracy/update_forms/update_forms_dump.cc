// ql_values_dump (same input, same output records: d0, e0, lambda, H) with its own serial
// copy of the Householder reduction, to compare rank-2 update forms:
//   serial  tridiag_eigen.h's form, A -= (v p^T + p v^T) - 2K v v^T (a check: bitwise
//           equal to ql_values_dump ... reverse)
//   old     the register kernel's former form: x = p - K v, A -= v x^T + x v^T, each
//           product rounded (A bitwise symmetric)
//   fma     the register kernel's form: x = fma(-K, v, p), A(i,j) = fma(-v_i, x_j, fma(-x_i,
//           v_j, A(i,j))) on both triangles (A asymmetric by rounding)
//   symfma  the fma form on the lower triangle (i >= j), mirrored to the upper
//   tiles   a symmetric form tried in the kernel (not kept: +0.3 ms a frame): x as fma;
//           in a 16 x 16 diagonal tile (i/16 == j/16) A(i,j) -= v_i x_j + x_i v_j with rounded
//           products; off them two FMAs ordered by index, hi = max(i,j), lo = min(i,j):
//           A(i,j) = fma(-v_hi, x_lo, fma(-x_hi, v_lo, A(i,j))) (A bitwise symmetric; the
//           tool counts asymmetric entries of the trailing matrix after each update)
//   tilesfma as tiles off the diagonal tiles; inside a 16 x 16 diagonal tile (i/16 == j/16) the
//           asymmetric fma form A(i,j) = fma(-v_i, x_j, fma(-x_i, v_j, A(i,j))) with i = row,
//           j = column (A symmetric except inside the diagonal tiles; the counter also runs)
// As the register kernel, the reflector of step k comes from row k (A(k, j), j >= k+1,
// sigma of j >= k+2), p_i = tau sum_j A(i, j) v_j reads row i, and e[n-2] = A(n-2, n-1):
// the storage is row-major, a[i * lda + j] = A(i, j), so v_k left in row k at j >= k+2 is
// where FormReflectorProduct reads it (a + k * lda). K = (tau/2) p.v with p.v = sum p_i v_i
// as tridiag_eigen.h. QlValues runs on the oriented T (OrientForQl), as the GPU.
// Build (from the repository root): g++ -O2 -std=c++20 -ffp-contract=off -I.
//   scripts/eigen_accuracy/update_forms/update_forms_dump.cc -o /tmp/update_forms_dump
// Run: update_forms_dump BLOCKS.bin OUT.bin serial|old|fma|symfma|tiles|tilesfma
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#include "core/numerics/tridiag_eigen.h"
using namespace spexd::core::tridiag;
enum Mode { kSerial, kOld, kFma, kSymFma, kTiles, kTilesFma };
static long g_asym = 0, g_checked = 0;  // tiles: asymmetric trailing entries, entries checked
static double RowSigma(const double* row, int from, int n) {
  double s = 0.0;
  for (int j = from; j < n; ++j) s += row[j] * row[j];
  return s;
}
static void Reduce(double* a, int lda, int n, double* d, double* e, double* tau, Mode mode) {
  std::vector<double> v(n), p(n), x(n);
  double sigma = RowSigma(a, 2, n);
  for (int k = 0; k + 2 < n; ++k) {
    double* row = a + k * lda;
    const Reflector h = MakeReflector(row[k + 1], sigma);
    for (int j = k + 1; j < n; ++j) v[j] = j == k + 1 ? 1.0 : (row[j] *= h.scale);
    d[k] = row[k], e[k] = h.beta, tau[k] = h.tau;
    if (h.tau != 0.0) {
      double pv = 0.0;
      for (int i = k + 1; i < n; ++i) pv += (p[i] = h.tau * InterleavedDot(a + i * lda, v.data(), k + 1, n)) * v[i];
      const double two_k = h.tau * pv, kk = 0.5 * two_k;
      for (int i = k + 1; i < n; ++i) x[i] = mode == kOld ? p[i] - kk * v[i] : std::fma(-kk, v[i], p[i]);
      for (int i = k + 1; i < n; ++i)
        for (int j = k + 1; j < (mode == kSymFma ? i + 1 : n); ++j) {
          double& aij = a[i * lda + j];
          if (mode == kSerial) aij -= (v[i] * p[j] + p[i] * v[j]) - two_k * (v[i] * v[j]);
          else if (mode == kOld || (mode == kTiles && i / 16 == j / 16)) aij -= v[i] * x[j] + x[i] * v[j];
          else if (mode == kTilesFma && i / 16 == j / 16) aij = std::fma(-v[i], x[j], std::fma(-x[i], v[j], aij));
          else if ((mode == kTiles || mode == kTilesFma) && i > j) aij = std::fma(-v[i], x[j], std::fma(-x[i], v[j], aij));
          else if (mode == kTiles || mode == kTilesFma) aij = std::fma(-v[j], x[i], std::fma(-x[j], v[i], aij));
          else aij = std::fma(-v[i], x[j], std::fma(-x[i], v[j], aij));
        }
      if (mode == kSymFma)
        for (int i = k + 1; i < n; ++i)
          for (int j = i + 1; j < n; ++j) a[i * lda + j] = a[j * lda + i];
      if (mode == kTiles || mode == kTilesFma)
        for (int i = k + 1; i < n; ++i)
          for (int j = i + 1; j < n; ++j, ++g_checked)
            g_asym += std::memcmp(&a[i * lda + j], &a[j * lda + i], sizeof(double)) != 0;
    }
    sigma = RowSigma(row + lda, k + 3, n);
  }
  d[n - 2] = a[(n - 2) * lda + n - 2], e[n - 2] = a[(n - 2) * lda + n - 1];
  d[n - 1] = a[(n - 1) * lda + n - 1], e[n - 1] = 0.0;
}
int main(int argc, char** argv) {
  const char* names[] = {"serial", "old", "fma", "symfma", "tiles", "tilesfma"};
  int mode = 0;
  while (argc == 4 && mode < 6 && std::strcmp(argv[3], names[mode]) != 0) ++mode;
  if (argc != 4 || mode == 6) return std::fprintf(stderr, "usage: %s IN OUT serial|old|fma|symfma|tiles|tilesfma\n", argv[0]), 2;
  FILE *in = std::fopen(argv[1], "rb"), *out = std::fopen(argv[2], "wb");
  int count = 0;
  for (double head[4]; std::fread(head, sizeof(double), 4, in) == 4; ++count) {
    const int n = static_cast<int>(head[0]), lda = n + 1;
    std::vector<double> c(static_cast<size_t>(n) * n + n), s(static_cast<size_t>(lda) * n), d(n), e(n), tau(n), w(n);
    if (std::fread(c.data(), sizeof(double), c.size(), in) != c.size()) break;  // C, then x (unused)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) s[i * lda + j] = c[i * n + j];  // C symmetric
    Reduce(s.data(), lda, n, d.data(), e.data(), tau.data(), static_cast<Mode>(mode));
    SerialTeam t;
    FormReflectorProduct(t, s.data(), lda, n, tau.data(), w.data());  // H column-major in s
    std::vector<double> d0 = d, e0 = e, h(static_cast<size_t>(n) * n);
    OrientForQl(d.data(), e.data(), n);
    if (QlValues(d.data(), e.data(), n) < 0) std::fprintf(stderr, "block %d: QL failed\n", count);
    for (int col = 0; col < n; ++col)
      for (int r = 0; r < n; ++r) h[col * n + r] = s[col * lda + r];
    std::fwrite(d0.data(), sizeof(double), n, out), std::fwrite(e0.data(), sizeof(double), n, out);
    std::fwrite(d.data(), sizeof(double), n, out), std::fwrite(h.data(), sizeof(double), h.size(), out);
  }
  std::fprintf(stderr, "%d blocks\n", count);
  if (mode == kTiles || mode == kTilesFma) std::fprintf(stderr, "%s:", names[mode]), std::fprintf(stderr, " %ld asymmetric of %ld trailing off-diagonal pairs checked\n", g_asym, g_checked);
}
