// The eigensolver of core/numerics/tridiag_eigen.h run by a single host thread (SerialTeam: the
// kernel's algorithm, serially) against LAPACK dsyevd, on matrices with the spectra that
// C's 74x74 blocks show (condition ~1e3, and ~1e10 where unknowns have almost no pixels,
// spec §2.8), plus the structural corner cases of the reduction (zero columns, diagonal
// input, repeated eigenvalues, indefinite input). Needs no GPU.
#include "core/numerics/tridiag_eigen.h"
#include "core/numerics/tridiag_vectors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu/internal/lapack.h"
#include "gtest/gtest.h"
#include "tests/graded_tridiagonal.h"

namespace spexd::cuda {

// The shared eigen arithmetic (core/numerics/tridiag_eigen.h, tridiag_vectors.h).
using namespace ::spexd::core::tridiag;
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

using Matrix = std::vector<double>;  // column-major n x n

// V diag(lambda) V^T with V a product of n random Householder reflections.
Matrix WithSpectrum(const std::vector<double>& lambda, uint64_t seed) {
  const int n = static_cast<int>(lambda.size());
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  Matrix v(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) v[i * n + i] = 1.0;
  std::vector<double> u(n);
  for (int r = 0; r < n; ++r) {
    double uu = 0;
    for (double& x : u) {
      x = g(rng);
      uu += x * x;
    }
    for (int c = 0; c < n; ++c) {  // V <- (I - 2 u u^T / u^T u) V
      double dot = 0;
      for (int i = 0; i < n; ++i) dot += u[i] * v[c * n + i];
      for (int i = 0; i < n; ++i) v[c * n + i] -= 2.0 * dot / uu * u[i];
    }
  }
  Matrix a(v.size(), 0.0);
  for (int c = 0; c < n; ++c) {
    for (int r = c; r < n; ++r) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += v[k * n + r] * lambda[k] * v[k * n + c];
      a[c * n + r] = a[r * n + c] = s;
    }
  }
  return a;
}

struct Eigen {
  std::vector<double> lambda;
  Matrix v;
  int sweeps = 0;
  bool twisted = false;  // the vectors came from the twisted factorisations
};

// The paths of cuda/kernels/tridiag_decorrelation.cu, serially.
enum class Path { kInBlock, kLogged, kTwisted };

// The twisted kernel's vectors (TwistedKernel, serially): T's eigenvector for each of
// `lambda` (TwistedEigenvector; each value then replaced by its vector's Rayleigh
// quotient, and the vectors computed again from those where one moved), then, where
// max |Z^T Z - I| <= 1e-8 (the kernel's kTwistedMaxDeviation), one Newton-Schulz step,
// and H Z into h (column-major, lda).
// False: the deviation was larger (the kernel then runs QL with the rotations in the block).
bool TwistedVectors(const std::vector<double>& d0, const std::vector<double>& e0,
                    std::vector<double>* lambda, int n, double* h, int lda) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  std::vector<double> work(3 * nn + n, 0.0);  // Z, P, then Z P; the lower factor's scratch
  double* z = work.data();
  double* p = z + nn;
  double* zp = p + nn;
  double* lower = zp + nn;
  TwistedVectorsSerial(d0.data(), e0.data(), n, lambda->data(), z, n, lower);
  for (int i = 0; i < n; ++i) {  // G = Z^T Z, then P = (3I - G) / 2 where close
    for (int c = 0; c < n; ++c) {
      double g = 0;
      for (int r = 0; r < n; ++r) g += z[i * n + r] * z[c * n + r];
      p[c * n + i] = g;
    }
  }
  const bool close = NewtonSchulzFactor(p, n);
  if (close) {
    for (int c = 0; c < n; ++c) {
      for (int k = 0; k < n; ++k) {
        for (int r = 0; r < n; ++r) zp[c * n + r] += z[k * n + r] * p[c * n + k];
      }
    }
    std::fill(z, z + nn, 0.0);  // V = H (Z P)
    for (int c = 0; c < n; ++c) {
      for (int k = 0; k < n; ++k) {
        for (int r = 0; r < n; ++r) z[c * n + r] += h[k * lda + r] * zp[c * n + k];
      }
    }
    for (int c = 0; c < n; ++c) {
      for (int r = 0; r < n; ++r) h[c * lda + r] = z[c * n + r];
    }
  }
  return close;
}

// kLogged: QL by QlLogged, then ApplyLoggedSweeps row by row (the three-kernel path);
// kInBlock: TridiagonalQl (the in-block fallback); kTwisted: QlValues, then TwistedVectors
// (TridiagonalQl where it declines, as the twisted kernel does).
Eigen SolveTeam(const Matrix& a, int n, Path path) {
  const bool logged = path != Path::kInBlock;
  const int lda = n + 1;  // as the kernel: padded leading dimension
  std::vector<double> s(static_cast<std::size_t>(lda) * n);
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) s[c * lda + r] = a[c * n + r];
  }
  std::vector<double> d(n), e(n), tau(n), v(n), w(n), cbuf(2 * n), sbuf(2 * n);
  double scalar = 0.0;
  int ctl[6] = {};
  SerialTeam t;
  HouseholderTridiagonalize(t, s.data(), lda, n, d.data(), e.data(), tau.data(), v.data(), w.data(),
                            &scalar);
  FormReflectorProduct(t, s.data(), lda, n, tau.data(), w.data());
  const std::vector<double> d0 = d, e0 = e;
  Eigen out;
  if (logged) {
    const int rot_cap = 96 * n, sweep_cap = 8 * n;
    std::vector<double> lc(rot_cap), ls(rot_cap);
    std::vector<int> lohi(2 * sweep_cap);
    if (path == Path::kTwisted) {  // as the twisted kernels: values, vectors, else QL in the block
      out.sweeps = QlValuesOriented(d.data(), e.data(), n);
      if (out.sweeps >= 0) out.twisted = TwistedVectors(d0, e0, &d, n, s.data(), lda);
      if (!out.twisted) {
        d = d0;
        e = e0;
        out.sweeps = TridiagonalQl(t, d.data(), e.data(), s.data(), lda, n, cbuf.data(), sbuf.data(),
                                   ctl);
      }
    } else {
      out.sweeps =
          QlLogged(d.data(), e.data(), n, lc.data(), ls.data(), rot_cap, lohi.data(), sweep_cap);
    }
    for (int row = 0; path == Path::kLogged && out.sweeps >= 0 && row < n; ++row) {
      ApplyLoggedSweeps(s.data(), lda, row, lc.data(), ls.data(), lohi.data(), out.sweeps);
    }
  } else {
    out.sweeps = TridiagonalQl(t, d.data(), e.data(), s.data(), lda, n, cbuf.data(), sbuf.data(), ctl);
  }
  out.lambda = d;
  out.v.resize(static_cast<std::size_t>(n) * n);
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) out.v[c * n + r] = s[c * lda + r];
  }
  return out;
}

Eigen SolveLapack(const Matrix& a, int n) {
  Eigen out;
  out.v = a;
  out.lambda.resize(n);
  int lwork = -1, liwork = -1, info = 0, iw = 0;
  double wq = 0;
  dsyevd_("V", "L", &n, out.v.data(), &n, out.lambda.data(), &wq, &lwork, &iw, &liwork, &info, 1, 1);
  std::vector<double> work(static_cast<std::size_t>(wq) + 1);
  std::vector<int> iwork(static_cast<std::size_t>(iw) + 1);
  lwork = static_cast<int>(work.size());
  liwork = static_cast<int>(iwork.size());
  dsyevd_("V", "L", &n, out.v.data(), &n, out.lambda.data(), work.data(), &lwork, iwork.data(),
          &liwork, &info, 1, 1);
  EXPECT_EQ(info, 0);
  return out;
}

double FrobeniusNorm(const Matrix& a) {
  double s = 0;
  for (double x : a) s += x * x;
  return std::sqrt(s);
}

// Backward-stable solver checks (Demmel, Applied Numerical Linear Algebra §5.2): residual
// and orthogonality O(n eps), eigenvalues within O(n eps ||A||) of LAPACK's; with SPD
// input, Q = A^-1/2 within O(n eps cond(A)) of LAPACK's Q relative to max |Q| (the first
// order sensitivity of lambda^-1/2, and of the divided differences of the off-diagonal
// terms, is eps cond / 2 for a backward error eps ||A||). The factor 10 n covers both
// solvers' constants.
// Returns whether the twisted path took the vectors (Path::kTwisted).
bool CheckOne(const Matrix& a, int n, const std::string& what, bool spd, Path path) {
  SCOPED_TRACE(what + (path == Path::kLogged    ? " (logged QL)"
                       : path == Path::kInBlock ? " (in-block QL)"
                                                : " (twisted vectors)"));
  const Eigen mine = SolveTeam(a, n, path);
  EXPECT_GE(mine.sweeps, 0) << "QL did not converge";
  if (mine.sweeps < 0) return false;
  const Eigen ref = SolveLapack(a, n);
  const double anorm = FrobeniusNorm(a), tol = 10.0 * n * kEps;
  double resid = 0, orth = 0;
  for (int k = 0; k < n; ++k) {
    double rk = 0;
    for (int i = 0; i < n; ++i) {
      double s = -mine.lambda[k] * mine.v[k * n + i];
      for (int j = 0; j < n; ++j) s += a[j * n + i] * mine.v[k * n + j];
      rk += s * s;
    }
    resid = std::max(resid, std::sqrt(rk));
    for (int l = 0; l < n; ++l) {
      double s = k == l ? -1.0 : 0.0;
      for (int i = 0; i < n; ++i) s += mine.v[k * n + i] * mine.v[l * n + i];
      orth = std::max(orth, std::fabs(s));
    }
  }
  EXPECT_LE(resid, tol * anorm);
  EXPECT_LE(orth, tol);
  std::vector<double> sorted = mine.lambda;
  std::sort(sorted.begin(), sorted.end());
  for (int k = 0; k < n; ++k) EXPECT_NEAR(sorted[k], ref.lambda[k], tol * anorm) << "eigenvalue " << k;
  if (!spd) return mine.twisted;
  const double cond = ref.lambda[n - 1] / ref.lambda[0];
  double qmax = 0, err = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double q1 = 0, q2 = 0;
      for (int k = 0; k < n; ++k) {
        q1 += mine.v[k * n + i] / std::sqrt(mine.lambda[k]) * mine.v[k * n + j];
        q2 += ref.v[k * n + i] / std::sqrt(ref.lambda[k]) * ref.v[k * n + j];
      }
      qmax = std::max(qmax, std::fabs(q2));
      err = std::max(err, std::fabs(q1 - q2));
    }
  }
  EXPECT_LE(err, tol * cond * qmax) << "cond " << cond;
  ::testing::Test::RecordProperty("sweeps", mine.sweeps);
  return mine.twisted;
}

// Every path against LAPACK; returns whether the twisted path kept its own vectors.
bool CheckAgainstLapack(const Matrix& a, int n, const std::string& what, bool spd) {
  CheckOne(a, n, what, spd, Path::kInBlock);
  CheckOne(a, n, what, spd, Path::kLogged);
  return CheckOne(a, n, what, spd, Path::kTwisted);
}

std::vector<double> LogSpaced(int n, double top, double cond) {
  std::vector<double> l(n);
  for (int i = 0; i < n; ++i) l[i] = top * std::pow(cond, -static_cast<double>(i) / std::max(n - 1, 1));
  return l;
}

// T = H^T A H by the kernels' reduction (SerialTeam): its diagonal and subdiagonal (e[n-1] 0).
struct Tridiagonal {
  std::vector<double> d, e;
};
Tridiagonal Reduce(const Matrix& a, int n) {
  const int lda = n + 1;  // as the kernel: padded leading dimension
  std::vector<double> s(static_cast<std::size_t>(lda) * n), tau(n), v(n), w(n);
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) s[c * lda + r] = a[c * n + r];
  }
  Tridiagonal t{std::vector<double>(n), std::vector<double>(n, 0.0)};
  double scalar = 0.0;
  SerialTeam team;
  HouseholderTridiagonalize(team, s.data(), lda, n, t.d.data(), t.e.data(), tau.data(), v.data(),
                            w.data(), &scalar);
  return t;
}

class TridiagSizes : public ::testing::TestWithParam<int> {};

TEST_P(TridiagSizes, SpdSpectraOfCBlocks) {
  const int n = GetParam();
  for (double cond : {1.0 + 1e-3, 1e3, 1e6, 1e10}) {
    const bool twisted = CheckAgainstLapack(WithSpectrum(LogSpaced(n, 1e5, cond), 17 + n), n,
                                            "log-spaced, cond " + std::to_string(cond), true);
    // The spectra of the real blocks (cond 2e2..1.4e4): the twisted vectors must be kept.
    if (cond == 1e3) {
      EXPECT_TRUE(twisted) << "the twisted path declined a C-like spectrum";
    }
  }
  // C = M^-1 of a patch with unknowns that see almost no pixels: most eigenvalues
  // 1e2..1e5, a few at 1e14 (regularised bins).
  std::vector<double> l = LogSpaced(n, 1e5, 1e3);
  for (int i = 0; i < n; i += 11) l[i] = 1e14 * (1.0 + 0.1 * i);
  CheckAgainstLapack(WithSpectrum(l, 3 + n), n, "a few huge eigenvalues", true);
}

TEST_P(TridiagSizes, RepeatedAndIndefiniteSpectra) {
  const int n = GetParam();
  std::vector<double> l = LogSpaced(n, 1.0, 1e3);
  for (int i = 0; i < n; i += 2) l[i] = 0.5;  // a cluster of exactly repeated eigenvalues
  const bool twisted = CheckAgainstLapack(WithSpectrum(l, 5 + n), n, "repeated", true);
  // Exactly repeated eigenvalues give one vector twice: the rotations must take over.
  if (n >= 3) {
    EXPECT_FALSE(twisted) << "the twisted path kept the vectors of a repeated eigenvalue";
  }
  std::vector<double> ind(n);
  for (int i = 0; i < n; ++i) ind[i] = std::cos(1.7 * i);  // both signs, one near zero
  CheckAgainstLapack(WithSpectrum(ind, 9 + n), n, "indefinite", false);
}

TEST_P(TridiagSizes, StructuredInputs) {
  const int n = GetParam();
  Matrix diag(static_cast<std::size_t>(n) * n, 0.0), tri = diag, block = diag;
  for (int i = 0; i < n; ++i) {
    diag[i * n + i] = 1.0 + i;  // every reflector is the identity (tau = 0)
    tri[i * n + i] = 2.0;
    if (i + 1 < n) tri[i * n + i + 1] = tri[(i + 1) * n + i] = -1.0;
  }
  CheckAgainstLapack(diag, n, "diagonal", true);
  CheckAgainstLapack(tri, n, "tridiagonal", true);
  // Two uncoupled halves: zero columns below the subdiagonal in the middle.
  const Matrix full = WithSpectrum(LogSpaced(n, 10.0, 1e2), 23);
  const int h = n / 2;
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) block[c * n + r] = ((r < h) == (c < h)) ? full[c * n + r] : 0.0;
  }
  CheckAgainstLapack(block, n, "block diagonal", true);
}

// A log too small for the sweeps must be reported (-2: the kernel then runs the block's QL
// itself), never overrun.
TEST(TridiagQl, FullLogIsReported) {
  const int n = 32;
  const auto [d, e] = Reduce(WithSpectrum(LogSpaced(n, 1e5, 1e3), 41), n);
  for (const auto& [rot_cap, sweep_cap] : {std::pair{2 * n, 8 * n}, std::pair{96 * n, 3}}) {
    std::vector<double> dd = d, ee = e;
    std::vector<double> lc(rot_cap + 1, -7.0), ls(rot_cap + 1, -7.0);
    std::vector<int> lohi(2 * sweep_cap + 2, -7);
    EXPECT_EQ(QlLogged(dd.data(), ee.data(), n, lc.data(), ls.data(), rot_cap, lohi.data(), sweep_cap), -2);
    EXPECT_EQ(lc[rot_cap], -7.0) << "rotation log overrun";
    EXPECT_EQ(lohi[2 * sweep_cap], -7) << "sweep log overrun";
  }
}

// QlNextSweep takes the deflation search's answer from the sweep before (QlState::known_*)
// instead of searching again. Run against the same sweeps with that answer forgotten before
// every call (the search each time, without the shortcut): the same m every time, so the
// same rotations, eigenvalues and sweeps, bit for bit. Spectra of C's blocks, clusters,
// exact repeats, zeros on the subdiagonal and tiny entries (deflation in mid-block).
TEST(TridiagQl, KnownDeflationEqualsTheSearchBitForBit) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  int cases = 0, sweeps_total = 0;
  for (int n : {2, 3, 5, 17, 74, 80}) {
    for (int kind = 0; kind < 6; ++kind) {
      std::vector<double> d(n), e(n, 0.0);
      if (kind < 3) {  // tridiagonal forms of C-like blocks
        const double cond = kind == 0 ? 1e3 : kind == 1 ? 1e10 : 1.0 + 1e-6;
        const Tridiagonal t = Reduce(WithSpectrum(LogSpaced(n, 1e5, cond), 100 + n + kind), n);
        d = t.d;
        e = t.e;
      } else {  // random, with exact zeros, tiny entries and repeated diagonals
        for (int i = 0; i < n; ++i) {
          d[i] = kind == 5 && i % 3 == 0 ? 0.5 : u(rng);
          if (i + 1 < n) e[i] = (kind == 3 && i % 7 == 3) ? 0.0 : (kind == 4 && i % 5 == 2) ? 1e-18 * u(rng) : u(rng);
        }
      }
      std::vector<double> d1 = d, e1 = e, d2 = d, e2 = e;
      std::vector<double> c1(n), s1(n), c2(n), s2(n);
      QlState st1, st2;
      for (int sweep = 0;; ++sweep) {
        int lo1 = 0, hi1 = -1, lo2 = 0, hi2 = -1;
        st2.known_l = -1;  // forget: search without the shortcut
        const int r1 = QlNextSweep(&st1, d1.data(), e1.data(), n, c1.data(), s1.data(), &lo1, &hi1);
        const int r2 = QlNextSweep(&st2, d2.data(), e2.data(), n, c2.data(), s2.data(), &lo2, &hi2);
        ASSERT_EQ(r1, r2) << "n " << n << " kind " << kind << " sweep " << sweep;
        if (r1 <= 0) break;
        ASSERT_EQ(lo1, lo2);
        ASSERT_EQ(hi1, hi2);
        ASSERT_EQ(st1.l, st2.l);
        for (int k = 0; k <= hi1 - lo1; ++k) {
          ASSERT_EQ(c1[k], c2[k]);
          ASSERT_EQ(s1[k], s2[k]);
        }
        ++sweeps_total;
      }
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(d1[i], d2[i]) << "n " << n << " kind " << kind << " i " << i;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 36);
  EXPECT_GT(sweeps_total, 500);  // the comparison saw real work
}

// QlValues (the twisted path's eigenvalues) runs QlLogged's arithmetic without the log:
// the same eigenvalues and sweep count, bit for bit.
TEST(TridiagQl, ValuesAloneEqualLoggedBitForBit) {
  for (int n : {1, 2, 7, 74, 80}) {
    for (double cond : {1e3, 1e10}) {
      const Tridiagonal t = Reduce(WithSpectrum(LogSpaced(n, 1e5, cond), 300 + n), n);
      std::vector<double> d1 = t.d, e1 = t.e, d2 = t.d, e2 = t.e;
      const int rot_cap = 400 * n + 400, sweep_cap = 60 * n + 60;  // room for any sweeps
      std::vector<double> lc(rot_cap), ls(rot_cap);
      std::vector<int> lohi(2 * sweep_cap);
      const int logged = QlLogged(d1.data(), e1.data(), n, lc.data(), ls.data(), rot_cap, lohi.data(), sweep_cap);
      ASSERT_GE(logged, 0);
      EXPECT_EQ(QlValues(d2.data(), e2.data(), n), logged) << "n " << n;
      for (int i = 0; i < n; ++i) EXPECT_EQ(d1[i], d2[i]) << "n " << n << " i " << i;
    }
  }
}

// QlValuesInStep (the GPU's eigenvalue kernel, its lanes in step) runs QlValues's
// arithmetic: the same eigenvalues and sweep count, bit for bit, whether the chain runs alone
// or idles while other chains of its warp still sweep (a vote that stays true for `extra`
// rounds after it finished).
TEST(TridiagQl, InStepEqualsValuesBitForBit) {
  for (int n : {1, 2, 7, 74, 80}) {
    for (double cond : {1e3, 1e10}) {
      const Tridiagonal t = Reduce(WithSpectrum(LogSpaced(n, 1e5, cond), 500 + n), n);
      std::vector<double> d1 = t.d, e1 = t.e;
      OrientForQl(d1.data(), e1.data(), n);
      std::vector<double> d2 = d1, e2 = e1;
      const int sweeps = QlValues(d1.data(), e1.data(), n);
      ASSERT_GE(sweeps, 0);
      for (int extra : {0, 1, 40}) {
        std::vector<double> d3 = d2, e3 = e2;
        int rounds = 0, left = extra;
        const int got = QlValuesInStep(d3.data(), e3.data(), n, [&](bool running) {
          ++rounds;
          return running || left-- > 0;
        });
        EXPECT_EQ(got, sweeps) << "n " << n << " extra " << extra;
        EXPECT_GE(rounds, sweeps + 1 + extra);
        for (int i = 0; i < n; ++i) EXPECT_EQ(d3[i], d1[i]) << "n " << n << " i " << i;
      }
    }
  }
}

// A chain whose QL fails (NaN in T: no deflation) reports -1 in step too, and idles after.
TEST(TridiagQl, InStepReportsAFailure) {
  std::vector<double> d = {1.0, NAN, 2.0}, e = {0.5, 0.5, 0.0};
  std::vector<double> d2 = d, e2 = e;
  EXPECT_EQ(QlValues(d.data(), e.data(), 3), -1);
  int left = 5;
  EXPECT_EQ(QlValuesInStep(d2.data(), e2.data(), 3, [&](bool running) { return running || left-- > 0; }), -1);
}

// Graded T with its large end at the top, as the reduced core blocks (d_0 ~ 8 d_end): QL
// on T as it stands lost up to 6.8e-12 relative on the small eigenvalues of these (22 of
// the 48 above 1e-14); oriented (chased from the small end, LAPACK's QL/QR choice) at most
// 4.4e-15. The bar 1e-14 is 2.3x that, and fails without the orientation.
TEST(TridiagQl, OrientedValuesKeepRelativeAccuracyOnGradedT) {
  double worst = 0;
  for (int seed = 1; seed <= 16; ++seed) {
    for (double grade : {8.0, 100.0, 1e4}) {
      const spexd::testing::GradedT t = spexd::testing::GradedTridiagonal(seed, grade);
      const int n = static_cast<int>(t.d.size());
      std::vector<double> w = t.d, we = t.e;
      ASSERT_GE(QlValuesOriented(w.data(), we.data(), n), 0);
      std::sort(w.begin(), w.end());
      for (int k = 0; k < n; ++k) {
        const long double ref = spexd::testing::SturmEigenvalue(t.d, t.e, k);
        worst = std::max(worst, static_cast<double>(std::fabs(w[k] - ref) / ref));
      }
    }
  }
  EXPECT_LE(worst, 1e-14);
}

// The twisted solve's Rayleigh quotient repairs an eigenvalue that QL got slightly wrong:
// from values off by 1e-10 relative (worse than QL's worst on real blocks, 3.4e-12), the
// quotients are within 1e-14 of the Sturm reference on the graded T above (observed
// 2.1e-16: the error is O(residual^2 / gap); the bar leaves room for other compilers'
// contractions). Without the quotient the error is the 1e-10 put in.
TEST(TridiagVectors, RayleighQuotientCorrectsTheEigenvalue) {
  double worst = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    const spexd::testing::GradedT t = spexd::testing::GradedTridiagonal(seed, 100.0);
    const int n = static_cast<int>(t.d.size());
    std::vector<double> z(n), um(n);
    const double tnorm = TridiagonalNorm(t.d.data(), t.e.data(), n);
    for (int k = 0; k < n; ++k) {
      const long double ref = spexd::testing::SturmEigenvalue(t.d, t.e, k);
      const double off = static_cast<double>(ref) * (1.0 + ((k & 1) ? 1e-10 : -1e-10));
      double rq = off;
      ASSERT_GE(TwistedEigenvector(t.d.data(), t.e.data(), n, off, tnorm, z.data(), 1, um.data(),
                                   1, &rq),
                0);
      worst = std::max(worst, static_cast<double>(std::fabs(rq - ref) / ref));
    }
  }
  EXPECT_LE(worst, 1e-14);
}

// OrientForQl reverses only where the bottom end is the smaller, and the reversal is exact.
TEST(TridiagQl, OrientReversesOnlyWhereTheBottomEndIsSmaller) {
  const std::vector<double> d = {4.0, 3.0, 2.0, 1.0}, e = {0.5, 0.25, 0.125, 0.0};
  std::vector<double> d1 = d, e1 = e;
  ASSERT_TRUE(OrientForQl(d1.data(), e1.data(), 4));
  EXPECT_EQ(d1, (std::vector<double>{1.0, 2.0, 3.0, 4.0}));
  EXPECT_EQ(e1, (std::vector<double>{0.125, 0.25, 0.5, 0.0}));
  EXPECT_FALSE(OrientForQl(d1.data(), e1.data(), 4));  // now the top is the smaller
  std::vector<double> one = {5.0}, none = {0.0};
  EXPECT_FALSE(OrientForQl(one.data(), none.data(), 1));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TridiagSizes, ::testing::Values(1, 2, 3, 7, 32, 33, 74));

}  // namespace
}  // namespace spexd::cuda
