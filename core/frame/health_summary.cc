#include "core/frame/health_summary.h"

#include <algorithm>
#include <cstring>

namespace spexd::core {
namespace {

constexpr uint8_t kWeighted = 1;  // ivar > 0: in the chi2pix median
constexpr uint8_t kFailed = 2;    // the bin's patch failed: BAD2DFIT

// An unsigned key whose order is the doubles' order (negatives flipped; NaN beyond ±inf),
// so the selection below never compares NaN (std::nth_element needs a strict order).
uint64_t OrderKey(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u >> 63) != 0 ? ~u : (u | (uint64_t{1} << 63));
}

double FromKey(uint64_t k) {
  const uint64_t u = (k >> 63) != 0 ? (k & ~(uint64_t{1} << 63)) : ~k;
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The median without a copy of the values (health_summary.h), in two steps so that the
// first can run bundle by bundle as they stream: a histogram of the top 18 key bits
// (sign, exponent, 6 mantissa bits: an octave cut into 64 buckets, so the middle bucket
// of a chi2pix distribution holds a few per cent of the values), then one pass that
// gathers the values of the one or two buckets holding the middle ranks.
constexpr int kHistBits = 18, kHistShift = 64 - kHistBits;

template <typename Selected>
std::size_t HistogramAdd(const double* values, std::size_t n, Selected selected,
                         std::vector<uint32_t>* hist) {
  if (hist->empty()) hist->assign(std::size_t{1} << kHistBits, 0);
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!selected(i)) continue;
    ++(*hist)[OrderKey(values[i]) >> kHistShift];
    ++m;
  }
  return m;
}

// `hist` counts the m selected values of `values` (HistogramAdd); false when the values
// do not match it (then *median is untouched).
template <typename Selected>
bool MedianFromHistogram(const std::vector<uint32_t>& hist, std::size_t m, const double* values,
                         std::size_t n, Selected selected, double* median) {
  if (m == 0) {
    *median = 0.0;
    return true;
  }
  // Ranks h (the upper middle) and lo_rank (the lower one, = h for an odd count), as
  // MedianInPlace picks them.
  const std::size_t h = m / 2, lo_rank = m % 2 == 1 ? h : h - 1;
  std::size_t cum = 0, before_lo = 0, b_lo = 0, b_hi = 0;
  bool have_lo = false;
  for (std::size_t b = 0; b < hist.size(); ++b) {
    if (!have_lo && cum + hist[b] > lo_rank) {
      b_lo = b;
      before_lo = cum;
      have_lo = true;
    }
    if (cum + hist[b] > h) {
      b_hi = b;
      break;
    }
    cum += hist[b];
  }
  std::size_t kept = 0;
  for (std::size_t b = b_lo; b <= b_hi; ++b) kept += hist[b];
  std::vector<uint64_t> keys;
  keys.reserve(kept);
  std::size_t seen = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!selected(i)) continue;
    ++seen;
    const uint64_t k = OrderKey(values[i]);
    const std::size_t b = k >> kHistShift;
    if (b >= b_lo && b <= b_hi) keys.push_back(k);
  }
  if (seen != m || keys.size() != kept) return false;
  const std::size_t r = h - before_lo;  // rank h among the kept keys
  std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(r), keys.end());
  const double hi = FromKey(keys[r]);
  if (m % 2 == 1) {
    *median = hi;
    return true;
  }
  const double lo =
      FromKey(*std::max_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(r)));
  *median = lo + (hi - lo) * 0.5;  // numpy's mean of the two middle values, as MedianInPlace
  return true;
}

template <typename Selected>
double SelectMedian(const double* values, std::size_t n, Selected selected) {
  std::vector<uint32_t> hist;
  const std::size_t m = HistogramAdd(values, n, selected, &hist);
  double median = 0;
  MedianFromHistogram(hist, m, values, n, selected, &median);  // matches by construction
  return median;
}

}  // namespace

double MedianWhere(const double* values, const double* weights, std::size_t n) {
  if (weights == nullptr) return SelectMedian(values, n, [](std::size_t) { return true; });
  return SelectMedian(values, n, [weights](std::size_t i) { return weights[i] > 0; });
}


HealthAccumulator::HealthAccumulator(bool keep_chi2pix, MaskPolicy policy,
                                     std::size_t expected_bins)
    : keep_(keep_chi2pix), policy_(policy) {
  if (keep_) {
    chi2pix_.reserve(expected_bins);
    flags_.reserve(expected_bins);
  }
}

void HealthAccumulator::Add(const BundleResult& b) {
  health_.counts += b.counts;
  for (double c : b.patch_condition) {
    if (c > health_.worst_condition) {
      health_.worst_condition = c;
      health_.worst_condition_bundle = b.bundle;
    }
  }
  nwave_ = b.nwave;
  nspec_ += b.nfibers;
  // The median's histogram as the bundles stream, so that Finish has one pass left.
  const std::size_t n = std::min(b.chi2pix.size(), b.ivar.size());
  const double* ivar = b.ivar.data();
  weighted_ += HistogramAdd(b.chi2pix.data(), n, [ivar](std::size_t i) { return ivar[i] > 0; },
                            &chi2_hist_);
  if (!keep_) return;
  const int nw = b.nwave;
  const bool has_failed = !b.failed_bins.empty();
  for (int f = 0; f < b.nfibers; ++f) {
    const std::size_t row = static_cast<std::size_t>(f) * nw;
    for (int w = 0; w < nw; ++w) {
      const std::size_t i = row + w;
      const bool failed = has_failed && b.failed_bins[i] != 0;
      // The bits that need nothing frame-wide, by ComputeSpecMask's own rule.
      const uint32_t m = LocalMaskBits(b.pixmask_fraction[i], failed, policy_);
      health_.somebadpix += (m & kSomeBadPix) != 0;
      health_.allbadpix += (m & kAllBadPix) != 0;
      flags_.push_back(static_cast<uint8_t>((b.ivar[i] > 0 ? kWeighted : 0) |
                                            (failed ? kFailed : 0)));
    }
    const double* c = b.chi2pix.data() + row;
    chi2pix_.insert(chi2pix_.end(), c, c + nw);
    fiber_median_.push_back(BundleFiberMedian(b, f, &scratch_));
  }
}

void CountMaskBits(const Frame& f, FrameHealth* h) {
  h->bins = static_cast<int64_t>(f.mask.size());
  h->somebadpix = h->allbadpix = h->bad2dfit = 0;
  for (uint32_t m : f.mask) {
    h->somebadpix += (m & kSomeBadPix) != 0;
    h->allbadpix += (m & kAllBadPix) != 0;
    h->bad2dfit += (m & kBad2DFit) != 0;
  }
}

FrameHealth HealthAccumulator::Finish(const Frame* assembled) {
  FrameHealth h = health_;
  if (assembled != nullptr) {
    CountMaskBits(*assembled, &h);
    const std::size_t n = std::min(assembled->chi2pix.size(), assembled->ivar.size());
    const double* ivar = assembled->ivar.data();
    auto weighted = [ivar](std::size_t i) { return ivar[i] > 0; };
    if (!MedianFromHistogram(chi2_hist_, weighted_, assembled->chi2pix.data(), n, weighted,
                             &h.median_chi2pix)) {
      // Not the frame of the bundles added: its own median, from scratch.
      h.median_chi2pix = MedianWhere(assembled->chi2pix.data(), ivar, n);
    }
    return h;
  }
  if (!keep_ || nspec_ == 0) {
    h.somebadpix = h.allbadpix = 0;
    return h;
  }
  // The chi2pix rule of ComputeSpecMask (spec §2.13) on the kept array, with its fibre
  // medians from Add and the wavelength medians only where they decide.
  const int ns = nspec_, nw = nwave_;
  h.bins = static_cast<int64_t>(ns) * nw;
  const std::vector<double> wave_median =
      WaveMediansWhereDeciding(chi2pix_.data(), ns, nw, fiber_median_);
  int64_t bad2dfit = 0;
  for (int s = 0; s < ns; ++s) {
    const double fiber_limit = 5 * fiber_median_[s];
    for (int w = 0; w < nw; ++w) {
      const std::size_t i = static_cast<std::size_t>(s) * nw + w;
      const double c = chi2pix_[i];
      bad2dfit += (flags_[i] & kFailed) != 0 || (c > fiber_limit && c > 5 * wave_median[w]);
    }
  }
  h.bad2dfit = bad2dfit;
  const uint8_t* flags = flags_.data();
  MedianFromHistogram(chi2_hist_, weighted_, chi2pix_.data(), chi2pix_.size(),
                      [flags](std::size_t i) { return (flags[i] & kWeighted) != 0; },
                      &h.median_chi2pix);  // the kept values are the histogram's
  return h;
}

}  // namespace spexd::core
