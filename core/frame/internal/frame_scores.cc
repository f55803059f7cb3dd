#include "core/frame/internal/frame_scores.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/frame/internal/middle_values.h"
#include "core/plan/internal/wavelength_grid.h"

namespace spexd::core {
namespace {

struct TopHat {
  double lo, hi;
};

TopHat BandRange(char band) {
  switch (band) {
    case 'b': return {4000, 5800};
    case 'z': return {7600, 9800};
    default: return {5800, 7600};
  }
}

}  // namespace

double NumpySum(const double* a, std::size_t n) {
  // numpy's pairwise_sum: 8 interleaved partial sums for blocks up to 128 values,
  // recursive halving (at multiples of 8) above.
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return NumpySum(a, n2) + NumpySum(a + n2, n - n2);
}

double NumpyMedian(std::vector<double> v) { return NumpyMedianInPlace(v.data(), v.size()); }

double NumpyMedianInPlace(double* v, std::size_t n) {
  if (n == 0) return std::nan("");  // numpy: nan (with a warning) for an empty slice
  const internal::MiddleValues m = internal::SelectMiddle(v, n);
  if (m.nan) return std::nan("");
  return n % 2 == 1 ? m.hi : (m.lo + m.hi) / 2.0;
}

char ScoreBand(const std::vector<double>& wave) {
  const double mean = NumpySum(wave.data(), wave.size()) / static_cast<double>(wave.size());
  if (mean <= BandRange('b').hi) return 'b';
  if (mean >= BandRange('z').lo) return 'z';
  return 'r';
}

std::vector<FrameScore> ComputeRawScores(const Frame& frame, TaskPool* pool, int max_workers) {
  return ComputeRawScores(frame.flux.data(), frame.ivar.data(), frame.nspec, frame.nwave,
                          frame.wave, pool, max_workers);
}

std::vector<FrameScore> ComputeRawScores(const double* flux_rows, const double* ivar_rows,
                                         int nspec_rows, int nwave,
                                         const std::vector<double>& wave, TaskPool* pool,
                                         int max_workers) {
  if (nwave < 2 || nspec_rows <= 0) return {};
  const char band = ScoreBand(wave);
  const TopHat range = BandRange(band);
  const std::vector<double> dwave = GridGradient(wave);
  std::vector<int> bins;
  for (int w = 0; w < nwave; ++w) {
    if (wave[w] >= range.lo && wave[w] < range.hi) bins.push_back(w);
  }
  if (bins.empty()) return {};
  const std::string b(1, static_cast<char>(band - 'a' + 'A'));
  const std::string where = absl::StrCat("in wave. range ", range.lo, ",", range.hi, "A");
  const std::size_t nspec = static_cast<std::size_t>(nspec_rows);
  std::vector<FrameScore> scores = {
      {absl::StrCat("SUM_RAW_COUNT_", b), absl::StrCat("sum counts ", where), {}},
      {absl::StrCat("MEDIAN_RAW_COUNT_", b), absl::StrCat("median counts/A ", where), {}},
      {absl::StrCat("MEDIAN_RAW_SNR_", b), absl::StrCat("median SNR/sqrt(A) ", where), {}},
  };
  for (FrameScore& score : scores) score.values.resize(nspec);
  // What every fibre divides by, per band bin: dwave and its square root (the same values
  // for each fibre, so taken once: the bits do not change).
  const std::size_t nb = bins.size();
  std::vector<double> dw(nb), sqrt_dw(nb);
  for (std::size_t k = 0; k < nb; ++k) {
    dw[k] = dwave[static_cast<std::size_t>(bins[k])];
    sqrt_dw[k] = std::sqrt(dw[k]);
  }
  // A band of an increasing grid is one run of bins: rows are then read in place.
  const bool one_run = static_cast<std::size_t>(bins.back() - bins.front()) + 1 == nb;
  // Two medians of a band's ~2300 bins per fibre: a frame's scores take ~11 ms of one
  // core (spexd_frame_write_bench, Zen 4), on the critical path of every frame file.
  // Fibres are independent.
  constexpr int kFibresPerTask = 16;
  const int ntasks = (nspec_rows + kFibresPerTask - 1) / kFibresPerTask;
  ParallelFor(pool, max_workers, ntasks, [&](int, int task) {
    const int begin = task * kFibresPerTask;
    const int end = std::min(nspec_rows, begin + kFibresPerTask);
    // The band's flux and ivar of each fibre: in place, or gathered.
    std::vector<double> gathered(one_run ? 0 : 2 * nb * static_cast<std::size_t>(end - begin));
    std::vector<const double*> flux(static_cast<std::size_t>(end - begin));
    std::vector<const double*> ivar(flux.size());
    for (int s = begin; s < end; ++s) {
      const std::size_t row = static_cast<std::size_t>(s) * nwave;
      const std::size_t j = static_cast<std::size_t>(s - begin);
      if (one_run) {
        flux[j] = flux_rows + row + bins.front();
        ivar[j] = ivar_rows + row + bins.front();
        continue;
      }
      double* f = gathered.data() + 2 * nb * j;
      double* v = f + nb;
      for (std::size_t k = 0; k < nb; ++k) {
        f[k] = flux_rows[row + static_cast<std::size_t>(bins[k])];
        v[k] = ivar_rows[row + static_cast<std::size_t>(bins[k])];
      }
      flux[j] = f;
      ivar[j] = v;
    }
    // desispec's np.sum(flux[:, inband], axis=1): the boolean-indexed copy is
    // Fortran-ordered (numpy 1.24, Debian 12), so numpy adds each row's values in order
    // rather than pairwise. tests/python checks the bits against numpy. Four fibres' sums
    // side by side: each still in its own order, four chains of additions in flight.
    for (std::size_t j0 = 0; j0 < flux.size(); j0 += 4) {
      double sum[4] = {0.0, 0.0, 0.0, 0.0};
      const std::size_t nj = std::min<std::size_t>(4, flux.size() - j0);
      if (nj == 4) {
        for (std::size_t k = 0; k < nb; ++k) {
          for (std::size_t j = 0; j < 4; ++j) sum[j] += flux[j0 + j][k];
        }
      } else {
        for (std::size_t j = 0; j < nj; ++j) {
          for (std::size_t k = 0; k < nb; ++k) sum[j] += flux[j0 + j][k];
        }
      }
      for (std::size_t j = 0; j < nj; ++j) scores[0].values[begin + j0 + j] = sum[j];
    }
    std::vector<double> count(nb), snr(nb);
    for (int s = begin; s < end; ++s) {
      const double* f = flux[static_cast<std::size_t>(s - begin)];
      const double* v = ivar[static_cast<std::size_t>(s - begin)];
      // Elementwise, so that they vectorise (sqrt without errno: frame_scores.cc's flags).
      for (std::size_t k = 0; k < nb; ++k) count[k] = f[k] / dw[k];
      for (std::size_t k = 0; k < nb; ++k) {
        const double iv = v[k] < 0 ? 0.0 : v[k];
        snr[k] = std::sqrt(iv) * f[k] / sqrt_dw[k];
      }
      scores[1].values[s] = NumpyMedianInPlace(count.data(), nb);
      scores[2].values[s] = NumpyMedianInPlace(snr.data(), nb);
    }
  });
  return scores;
}

}  // namespace spexd::core
