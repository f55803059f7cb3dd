// Serial replay of the parallel Jacobi schedule of cuda/decorrelation.cu (same phases,
// same helpers) against LAPACK dsyevd. Needs no GPU.
#include "cuda/jacobi_math.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "core/cpu/internal/lapack.h"
#include "gtest/gtest.h"

namespace spexd::cuda {
namespace {

// A (row-major n x n, symmetric) -> eigenvalues (diagonal) and V, replaying the kernel's
// fused rounds (RotateBlock over the lower block triangle, mirrored; V by pairs).
int ReplayJacobi(std::vector<double>* a_in, std::vector<double>* v_out, int n) {
  const int m = n + (n & 1), np = m / 2, nblk = np * (np + 1) / 2;
  std::vector<double> a(static_cast<std::size_t>(m) * m, 0.0), v(a.size(), 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) a[i * m + j] = (*a_in)[i * n + j];
  }
  for (int i = 0; i < m; ++i) v[i * m + i] = 1.0;
  double dmax = 0;
  for (int i = 0; i < n; ++i) dmax = std::max(dmax, std::fabs(a[i * m + i]));
  const double abs_tol = kJacobiAbsTol * dmax;
  std::vector<int> pp(np), pq(np);
  std::vector<double> pc(np), ps(np);
  int sweep = 0;
  for (; sweep < kJacobiMaxSweeps; ++sweep) {
    bool rotated = false;
    for (int round = 0; round < m - 1; ++round) {
      for (int k = 0; k < np; ++k) {
        int p, q;
        RoundRobinPair(round, k, m, &p, &q);
        double c = 1, s = 0;
        if (q < n && JacobiRotation(a[p * m + p], a[q * m + q], a[q * m + p], abs_tol, &c, &s)) rotated = true;
        pp[k] = p;
        pq[k] = q;
        pc[k] = c;
        ps[k] = s;
      }
      for (int b = 0; b < nblk; ++b) {
        int k1, k2;
        LowerBlockPair(b, &k1, &k2);
        if (ps[k1] == 0.0 && ps[k2] == 0.0) continue;
        const int p1 = pp[k1], q1 = pq[k1], p2 = pp[k2], q2 = pq[k2];
        double xpp = a[p1 * m + p2], xpq = a[p1 * m + q2], xqp = a[q1 * m + p2], xqq = a[q1 * m + q2];
        RotateBlock(pc[k1], ps[k1], pc[k2], ps[k2], &xpp, &xpq, &xqp, &xqq);
        if (k1 == k2) {
          a[p1 * m + p1] = xpp;
          a[q1 * m + q1] = xqq;
          a[p1 * m + q1] = a[q1 * m + p1] = 0.0;
        } else {
          a[p1 * m + p2] = a[p2 * m + p1] = xpp;
          a[p1 * m + q2] = a[q2 * m + p1] = xpq;
          a[q1 * m + p2] = a[p2 * m + q1] = xqp;
          a[q1 * m + q2] = a[q2 * m + q1] = xqq;
        }
      }
      for (int k = 0; k < np; ++k) {
        if (ps[k] == 0.0) continue;
        for (int i = 0; i < m; ++i) RotatePair(pc[k], ps[k], &v[i * m + pp[k]], &v[i * m + pq[k]]);
      }
    }
    if (!rotated) break;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) (*a_in)[i * n + j] = a[i * m + j];
  }
  v_out->assign(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) (*v_out)[i * n + j] = v[i * m + j];
  }
  return sweep;
}

TEST(JacobiMath, LowerBlockPairEnumeratesTheTriangle) {
  int b = 0;
  for (int k1 = 0; k1 < 300; ++k1) {
    for (int k2 = 0; k2 <= k1; ++k2, ++b) {
      int r1, r2;
      LowerBlockPair(b, &r1, &r2);
      ASSERT_EQ(r1, k1);
      ASSERT_EQ(r2, k2);
    }
  }
}

TEST(JacobiMath, RoundRobinMeetsEveryPairOnce) {
  for (int m : {2, 8, 74, 76}) {
    std::set<std::pair<int, int>> seen;
    for (int r = 0; r < m - 1; ++r) {
      std::set<int> used;
      for (int k = 0; k < m / 2; ++k) {
        int p, q;
        RoundRobinPair(r, k, m, &p, &q);
        ASSERT_LT(p, q);
        ASSERT_TRUE(used.insert(p).second && used.insert(q).second) << "pairs of a round overlap";
        ASSERT_TRUE(seen.insert({p, q}).second) << "pair met twice";
      }
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(m * (m - 1) / 2));
  }
}

class JacobiSizes : public ::testing::TestWithParam<int> {};

TEST_P(JacobiSizes, InverseSquareRootMatchesLapack) {
  const int n = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(n));
  std::uniform_real_distribution<double> u(-1, 1);
  // SPD with condition ~1e3, like C's blocks (spec §2.9).
  std::vector<double> g(static_cast<std::size_t>(n) * n), a(g.size());
  for (double& x : g) x = u(rng);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = i == j ? 0.02 * n : 0.0;
      for (int k = 0; k < n; ++k) s += g[i * n + k] * g[j * n + k];
      a[i * n + j] = 1e4 * s;
    }
  }
  std::vector<double> work = a, v;
  const int sweeps = ReplayJacobi(&work, &v, n);
  EXPECT_LT(sweeps, kJacobiMaxSweeps);
  RecordProperty("sweeps", sweeps);
  // Q = V diag(lambda^-1/2) V^T vs LAPACK.
  std::vector<double> lam(n), evec = a;
  int lwork = -1, liwork = -1, info = 0, iw = 0;
  double wq = 0;
  dsyevd_("V", "L", &n, evec.data(), &n, lam.data(), &wq, &lwork, &iw, &liwork, &info, 1, 1);
  std::vector<double> w(static_cast<std::size_t>(wq) + 1);
  std::vector<int> iwork(static_cast<std::size_t>(iw) + 1);
  lwork = static_cast<int>(w.size());
  liwork = static_cast<int>(iwork.size());
  dsyevd_("V", "L", &n, evec.data(), &n, lam.data(), w.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  ASSERT_EQ(info, 0);
  double qmax = 0, err = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double q1 = 0, q2 = 0;
      for (int k = 0; k < n; ++k) {
        q1 += v[i * n + k] / std::sqrt(work[k * n + k]) * v[j * n + k];
        q2 += evec[i + k * n] / std::sqrt(lam[k]) * evec[j + k * n];
      }
      qmax = std::max(qmax, std::fabs(q2));
      err = std::max(err, std::fabs(q1 - q2));
    }
  }
  EXPECT_LT(err, 1e-12 * qmax) << "sweeps " << sweeps;
}

INSTANTIATE_TEST_SUITE_P(Sizes, JacobiSizes, ::testing::Values(1, 2, 7, 31, 32, 33, 74));

}  // namespace
}  // namespace spexd::cuda
