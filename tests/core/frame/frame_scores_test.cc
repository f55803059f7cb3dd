#include "core/frame/internal/frame_scores.h"

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/plan/internal/wavelength_grid.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// Two fibres on a 1 A grid 5796..5809 (mean 5802.5: r camera); bins 5800..5809 are in
// r's top hat [5800, 7600), so dwave = 1 and the scores are exact small sums/medians.
Frame TwoFibres() {
  Frame f;
  f.nspec = 2;
  f.nwave = 14;
  for (int w = 0; w < f.nwave; ++w) f.wave.push_back(5796.0 + w);
  for (int s = 0; s < f.nspec; ++s) {
    for (int w = 0; w < f.nwave; ++w) {
      f.flux.push_back(s == 0 ? w : 2.0 * w);  // bins 4..13 of the band: 4..13 (x2)
      f.ivar.push_back(s == 0 ? 4.0 : (w == 13 ? -1.0 : 1.0));
    }
  }
  return f;
}

TEST(FrameScoresTest, RawScoresOfTheCameraBand) {
  const std::vector<FrameScore> scores = ComputeRawScores(TwoFibres());
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_EQ(scores[0].name, "SUM_RAW_COUNT_R");
  EXPECT_EQ(scores[0].comment, "sum counts in wave. range 5800,7600A");
  EXPECT_EQ(scores[1].name, "MEDIAN_RAW_COUNT_R");
  EXPECT_EQ(scores[1].comment, "median counts/A in wave. range 5800,7600A");
  EXPECT_EQ(scores[2].name, "MEDIAN_RAW_SNR_R");
  EXPECT_EQ(scores[2].comment, "median SNR/sqrt(A) in wave. range 5800,7600A");
  // Fibre 0: bins 4..13 -> sum 85, median (8 + 9) / 2, SNR = 2 * flux -> 17.
  EXPECT_EQ(scores[0].values, (std::vector<double>{85.0, 170.0}));
  EXPECT_EQ(scores[1].values, (std::vector<double>{8.5, 17.0}));
  // Fibre 1: ivar 1 except a negative one (counted as 0) at the last bin: SNR values
  // 8, 10, ..., 24, 0 -> median (14 + 16) / 2.
  EXPECT_EQ(scores[2].values, (std::vector<double>{17.0, 15.0}));
}

// A frame's rows read in place (a bundle's, as the progressive frame file scores them)
// score as the frame scores them: the second fibre's row alone gives its values.
TEST(FrameScoresTest, RowsReadInPlaceScoreAsTheirFrame) {
  const Frame f = TwoFibres();
  const std::vector<FrameScore> whole = ComputeRawScores(f);
  const std::size_t row = static_cast<std::size_t>(f.nwave);
  const std::vector<FrameScore> second =
      ComputeRawScores(f.flux.data() + row, f.ivar.data() + row, 1, f.nwave, f.wave);
  ASSERT_EQ(second.size(), whole.size());
  for (std::size_t c = 0; c < whole.size(); ++c) {
    EXPECT_EQ(second[c].name, whole[c].name);
    EXPECT_EQ(second[c].values, std::vector<double>{whole[c].values[1]}) << whole[c].name;
  }
  EXPECT_EQ(f.flux, TwoFibres().flux);  // the rows are read, not reordered
}

TEST(FrameScoresTest, BandFromTheMeanWavelength) {
  EXPECT_EQ(ScoreBand({3600.0, 5800.0}), 'b');
  EXPECT_EQ(ScoreBand({5760.0, 7620.0}), 'r');
  EXPECT_EQ(ScoreBand({7500.0, 9824.0}), 'z');
}

TEST(FrameScoresTest, NoBinInTheBandGivesNoScores) {
  Frame f;
  f.nspec = 1;
  f.nwave = 3;
  f.wave = {3000.0, 3001.0, 3002.0};  // band b, all below 4000
  f.flux = {1, 2, 3};
  f.ivar = {1, 1, 1};
  EXPECT_TRUE(ComputeRawScores(f).empty());
}

TEST(FrameScoresTest, NumpyArithmetic) {
  // Below 8 values: sequential; above: 8 interleaved partial sums. With 1e16 and ones
  // the two orders give different results, which pins the order.
  std::vector<double> v(16, 1.0);
  v[0] = 1e16;
  // Sequential: 1e16 + 1 + ... loses every 1 -> 1e16. Pairwise (lanes): lane 0 = 1e16 + 1
  // (= 1e16), lanes 1..7 = 2 each -> 1e16 + 14.
  EXPECT_EQ(NumpySum(v.data(), v.size()), 1e16 + 14);
  EXPECT_EQ(NumpySum(v.data(), 7), 1e16);
  std::vector<double> big(1000);
  std::iota(big.begin(), big.end(), 0.0);
  EXPECT_EQ(NumpySum(big.data(), big.size()), 499500.0);
  EXPECT_EQ(NumpyMedian({3, 1, 2}), 2.0);
  EXPECT_EQ(NumpyMedian({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(NumpyMedian({})));
  std::vector<double> scratch = {4, 1, 3, 2};
  EXPECT_EQ(NumpyMedianInPlace(scratch.data(), scratch.size()), 2.5);
  EXPECT_EQ(NumpyMedianInPlace(scratch.data(), 3), NumpyMedian({scratch[0], scratch[1], scratch[2]}));
  EXPECT_TRUE(std::isnan(NumpyMedianInPlace(scratch.data(), 0)));
}

// Each score against its definition evaluated bin by bin, bit for bit: 37 fibres (the
// four-fibre sums' and the tasks' remainders), negative and zero ivar, on the r grid (the
// band's rows read in place) and on a grid whose band bins are not one run (gathered; not
// increasing, so some dwave are negative and the SNR medians NaN, as numpy's would be).
TEST(FrameScoresTest, ScoresEqualTheirDefinitionBinByBin) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> flux(50.0, 40.0), ivar(0.5, 0.6);
  for (const bool interleaved : {false, true}) {
    Frame f;
    f.nspec = 37;
    f.nwave = interleaved ? 500 : 2326;
    for (int w = 0; w < f.nwave; ++w) {
      // Interleaved: every third bin below the band, the others inside it.
      f.wave.push_back(interleaved ? (w % 3 == 0 ? 5000.0 : 6000.0) + 0.7 * w : 5760.0 + 0.8 * w);
    }
    for (int i = 0; i < f.nspec * f.nwave; ++i) {
      f.flux.push_back(flux(rng));
      f.ivar.push_back(i % 97 == 0 ? 0.0 : ivar(rng));
    }
    const std::vector<FrameScore> scores = ComputeRawScores(f);
    ASSERT_EQ(scores.size(), 3u);
    const std::vector<double> dwave = GridGradient(f.wave);
    for (int s = 0; s < f.nspec; ++s) {
      double sum = 0.0;
      std::vector<double> count, snr;
      for (int w = 0; w < f.nwave; ++w) {
        if (f.wave[w] < 5800.0 || f.wave[w] >= 7600.0) continue;
        const double fl = f.flux[s * f.nwave + w], iv = f.ivar[s * f.nwave + w];
        sum += fl;
        count.push_back(fl / dwave[w]);
        snr.push_back(std::sqrt(iv < 0 ? 0.0 : iv) * fl / std::sqrt(dwave[w]));
      }
      ASSERT_GT(count.size(), 100u);
      EXPECT_EQ(scores[0].values[s], sum) << "fibre " << s;
      EXPECT_EQ(scores[1].values[s], NumpyMedian(count)) << "fibre " << s;
      const double want = NumpyMedian(snr);
      if (std::isnan(want)) {
        EXPECT_TRUE(interleaved && std::isnan(scores[2].values[s])) << "fibre " << s;
      } else {
        EXPECT_EQ(scores[2].values[s], want) << "fibre " << s;
      }
    }
  }
}

}  // namespace
}  // namespace spexd::core
