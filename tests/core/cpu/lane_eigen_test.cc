// The lane eigen-solver against its definition (A V = V diag(w), V orthogonal) and against
// LAPACK's dsyevd, on the kinds of matrices the decorrelation meets and on the edge cases
// of the reduction and of QL.
#include "core/cpu/internal/lane_eigen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/cpu/internal/lapack.h"
#include "tests/graded_tridiagonal.h"
#include "tests/random_spd.h"

namespace spexd::core::internal {
namespace {

using Matrix = std::vector<double>;  // column-major n x n
using spexd::testing::RandomSpd;


double MaxAbs(const Matrix& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::fabs(x));
  return m;
}

std::vector<double> LapackEigenvalues(Matrix a, int n) {
  std::vector<double> w(n);
  int info = 0, lwork = -1, liwork = -1, iwq = 0;
  double wq = 0;
  dsyevd_("N", "L", &n, a.data(), &n, w.data(), &wq, &lwork, &iwq, &liwork, &info, 1, 1);
  lwork = static_cast<int>(wq);
  liwork = iwq;
  std::vector<double> work(lwork);
  std::vector<int> iwork(liwork);
  dsyevd_("N", "L", &n, a.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork,
          &info, 1, 1);
  EXPECT_EQ(info, 0);
  return w;
}

// Residual ||A V - V diag(w)|| / (n ||A||), orthogonality ||V^T V - I|| / n, and the largest
// eigenvalue difference from dsyevd relative to max |w|: all within a small multiple of
// the unit roundoff (1.1e-16) for a backward-stable method; the bars allow 100 ulp.
void ExpectDecomposition(const Matrix& a, int n, const std::vector<double>& w,
                         const Matrix& v) {
  const double anorm = MaxAbs(a);
  double res = 0, orth = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      double av = 0, vv = 0;
      for (int k = 0; k < n; ++k) {
        av += a[i + k * n] * v[k + j * n];
        vv += v[k + i * n] * v[k + j * n];
      }
      res = std::max(res, std::fabs(av - v[i + j * n] * w[j]));
      orth = std::max(orth, std::fabs(vv - (i == j ? 1.0 : 0.0)));
    }
  }
  EXPECT_LE(res / (n * anorm), 1e-14);
  EXPECT_LE(orth / n, 1e-14);
  std::vector<double> sorted = w;
  std::sort(sorted.begin(), sorted.end());
  const std::vector<double> ref = LapackEigenvalues(a, n);
  double diff = 0, wmax = 0;
  for (int i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(sorted[i] - ref[i]));
    wmax = std::max(wmax, std::fabs(ref[i]));
  }
  EXPECT_LE(diff, 1e-13 * std::max(wmax, 1e-300));
}

// Every width this CPU runs: 4 lanes always, 8 where it has AVX-512.
std::vector<int> Widths() {
  std::vector<int> widths{4};
  if (LaneEigen::WidestLanes() == 8) widths.push_back(8);
  return widths;
}

void RunLanes(const std::vector<Matrix>& mats, int n, unsigned expect_ok) {
  for (int width : Widths()) {
    SCOPED_TRACE(::testing::Message() << width << " lanes");
    LaneEigen eig(n, width);
    ASSERT_EQ(eig.lanes(), width);
    std::vector<const double*> src;
    for (const Matrix& m : mats) src.push_back(m.data());
    eig.Load(src.data(), n, static_cast<int>(mats.size()));
    const unsigned ok = eig.Decompose();
    ASSERT_EQ(ok & ((1u << mats.size()) - 1), expect_ok);
    for (std::size_t l = 0; l < mats.size(); ++l) {
      if (!(ok >> l & 1u)) continue;
      std::vector<double> w(n);
      Matrix v(static_cast<std::size_t>(n) * n);
      eig.Export(static_cast<int>(l), w.data(), v.data());
      SCOPED_TRACE(::testing::Message() << "lane " << l);
      ExpectDecomposition(mats[l], n, w, v);
    }
  }
}

// The decomposition of a block in one lane, as values then vectors.
std::vector<double> Decomposed(LaneEigen& eig, int lane) {
  const int n = eig.n();
  std::vector<double> out(static_cast<std::size_t>(n) * (n + 1));
  eig.Export(lane, out.data(), out.data() + n);
  return out;
}

TEST(LaneEigenTest, RandomSpdBlocksOfTheDecorrelationSize) {
  std::mt19937_64 rng(11);
  const int n = 74;
  std::vector<Matrix> mats;
  for (double decades : {1.0, 4.0, 8.0, 12.0}) mats.push_back(RandomSpd(n, decades, &rng));
  RunLanes(mats, n, 0xF);
}

// Graded T (the reduced core blocks' shape, large end at the top) given as full matrices:
// the lanes chase QL from T's small end (OrientLanes), so the small eigenvalues keep their
// relative accuracy: within 1e-14 of a long-double Sturm reference (observed 4.3e-15);
// QL from the large end was off by up to 3.8e-12 on the same matrices.
TEST(LaneEigenTest, GradedMatricesKeepTheirSmallEigenvaluesRelativelyAccurate) {
  double worst = 0;
  for (double grade : {8.0, 100.0, 1e4}) {
    for (int seed0 = 1; seed0 <= 16; seed0 += 8) {
      std::vector<spexd::testing::GradedT> ts;
      std::vector<Matrix> as;
      for (int s = seed0; s < seed0 + 8; ++s) {
        ts.push_back(spexd::testing::GradedTridiagonal(s, grade));
        const int n = static_cast<int>(ts.back().d.size());
        Matrix a(static_cast<std::size_t>(n) * n, 0.0);
        for (int i = 0; i < n; ++i) a[i + i * n] = ts.back().d[i];
        for (int i = 0; i + 1 < n; ++i) a[i + 1 + i * n] = a[i + (i + 1) * n] = ts.back().e[i];
        as.push_back(std::move(a));
      }
      const int n = static_cast<int>(ts[0].d.size());
      LaneEigen le(n);
      for (std::size_t k0 = 0; k0 < as.size(); k0 += le.lanes()) {
        const int count = static_cast<int>(std::min<std::size_t>(le.lanes(), as.size() - k0));
        const double* src[LaneEigen::kMaxLanes];
        for (int l = 0; l < count; ++l) src[l] = as[k0 + l].data();
        le.Load(src, n, count);
        ASSERT_EQ(le.Decompose() & ((1u << count) - 1), (1u << count) - 1);
        std::vector<double> w(n), v(static_cast<std::size_t>(n) * n);
        for (int l = 0; l < count; ++l) {
          le.Export(l, w.data(), v.data());
          std::sort(w.begin(), w.end());
          const spexd::testing::GradedT& t = ts[k0 + l];
          for (int k = 0; k < n; ++k) {
            const long double ref = spexd::testing::SturmEigenvalue(t.d, t.e, k);
            worst = std::max(worst, static_cast<double>(std::fabs(w[k] - ref) / ref));
          }
        }
      }
    }
  }
  EXPECT_LE(worst, 1e-14);
}

TEST(LaneEigenTest, FewerMatricesThanLanes) {
  std::mt19937_64 rng(5);
  RunLanes({RandomSpd(74, 6.0, &rng)}, 74, 0x1);
  RunLanes({RandomSpd(30, 2.0, &rng), RandomSpd(30, 3.0, &rng)}, 30, 0x3);
}

TEST(LaneEigenTest, DiagonalTridiagonalAndRepeatedEigenvalues) {
  const int n = 20;
  Matrix diag(n * n, 0.0), tri(n * n, 0.0), repeated(n * n, 0.0), scaled(n * n, 0.0);
  for (int i = 0; i < n; ++i) {
    diag[i + i * n] = 1.0 + i;  // every reflector is the identity
    tri[i + i * n] = 2.0;
    if (i + 1 < n) tri[i + 1 + i * n] = tri[i + (i + 1) * n] = -1.0;
  }
  // 3 I + u u^T: eigenvalue 3 with multiplicity n - 1.
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      repeated[i + j * n] = (i == j ? 3.0 : 0.0) + 0.1 * (i + 1) * 0.1 * (j + 1);
      scaled[i + j * n] = 1e-200 * repeated[i + j * n];  // tiny values: the lane is scaled
    }
  }
  RunLanes({diag, tri, repeated, scaled}, n, 0xF);
}

TEST(LaneEigenTest, SmallSizes) {
  std::mt19937_64 rng(3);
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    RunLanes({RandomSpd(n, 2.0, &rng), RandomSpd(n, 0.0, &rng)}, n, 0x3);
  }
}

// A block's bits do not depend on the width, nor on the blocks beside it (the CPU backend
// groups patches so that their blocks fill the lanes, and the frame must not depend on
// the grouping): eight blocks decomposed eight at a time give the bits of the same blocks
// four at a time, where AVX-512 runs; a block alone gives its bits in a full group.
TEST(LaneEigenTest, ABlocksBitsDoNotDependOnWidthOrNeighbours) {
  std::mt19937_64 rng(21);
  const int n = 74;
  std::vector<Matrix> mats;
  for (int k = 0; k < 8; ++k) mats.push_back(RandomSpd(n, 1.0 + 1.5 * k, &rng));
  std::vector<const double*> src;
  for (const Matrix& m : mats) src.push_back(m.data());
  std::vector<std::vector<double>> four;
  LaneEigen by4(n, 4);
  for (int k = 0; k < 8; k += 4) {
    by4.Load(src.data() + k, n, 4);
    ASSERT_EQ(by4.Decompose(), 0xFu);
    for (int l = 0; l < 4; ++l) four.push_back(Decomposed(by4, l));
  }
  by4.Load(src.data() + 5, n, 1);  // block 5 alone
  ASSERT_EQ(by4.Decompose() & 1u, 1u);
  EXPECT_EQ(Decomposed(by4, 0), four[5]);
  if (LaneEigen::WidestLanes() < 8) {
    GTEST_SKIP() << "this CPU has no AVX-512: the 8-lane copy cannot run here";
  }
  LaneEigen by8(n, 8);
  by8.Load(src.data(), n, 8);
  ASSERT_EQ(by8.Decompose(), 0xFFu);
  for (int l = 0; l < 8; ++l) {
    SCOPED_TRACE(::testing::Message() << "block " << l);
    EXPECT_EQ(Decomposed(by8, l), four[static_cast<std::size_t>(l)]);
  }
}

TEST(LaneEigenTest, ANonFiniteLaneFailsAloneAndTheOthersStand) {
  std::mt19937_64 rng(8);
  const int n = 16;
  Matrix bad = RandomSpd(n, 2.0, &rng);
  bad[3 + 2 * n] = std::nan("");
  Matrix inf = RandomSpd(n, 2.0, &rng);
  inf[0] = INFINITY;
  RunLanes({RandomSpd(n, 3.0, &rng), bad, RandomSpd(n, 1.0, &rng), inf}, n, 0x5);
}

}  // namespace
}  // namespace spexd::core::internal
