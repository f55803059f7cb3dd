#include "core/frame/internal/middle_values.h"

#include <algorithm>
#include <bit>

namespace spexd::core::internal {
namespace {

// Ranges this short are sorted.
constexpr std::size_t kSortBelow = 24;

double MedianOf3(double x, double y, double z) {
  return std::max(std::min(x, y), std::min(std::max(x, y), z));
}

// The median of three medians of three, of nine values spread over a[0, n): a pivot near
// the middle for random values and for spectra alike (smooth runs, which fool a median of
// the first, middle and last values).
double Ninther(const double* a, std::size_t n) {
  const std::size_t s = n / 9;
  const double* p = a + s / 2;
  return MedianOf3(MedianOf3(p[0], p[s], p[2 * s]), MedianOf3(p[3 * s], p[4 * s], p[5 * s]),
                   MedianOf3(p[6 * s], p[7 * s], p[8 * s]));
}

// Moves the value of rank k of a[0, n) (no NaN) to a[k], with no greater value before it:
// quickselect on a ninther pivot, each round two branch-free passes (values below
// the pivot, then those equal to it, which ends the search when k falls among them). Past
// twice the rounds a fair pivot needs, std::nth_element takes the rest (no quadratic case).
void SelectRank(double* a, std::size_t n, std::size_t k) {
  std::size_t lo = 0, hi = n;  // a[lo, hi) holds rank k; before lo no greater value, after hi no smaller
  int rounds = 2 * static_cast<int>(std::bit_width(n)) + 4;
  while (hi - lo > kSortBelow) {
    if (--rounds < 0) {
      std::nth_element(a + lo, a + k, a + hi);
      return;
    }
    const double pivot = Ninther(a + lo, hi - lo);
    std::size_t below = lo;
    for (std::size_t i = lo; i < hi; ++i) {
      const double v = a[i];
      const bool less = v < pivot;
      a[i] = a[below];
      a[below] = v;
      below += less ? 1 : 0;
    }
    if (k < below) {
      hi = below;
      continue;
    }
    std::size_t equal = below;
    for (std::size_t i = below; i < hi; ++i) {
      const double v = a[i];
      const bool same = !(pivot < v);  // v >= pivot here
      a[i] = a[equal];
      a[equal] = v;
      equal += same ? 1 : 0;
    }
    if (k < equal) return;  // a[k] is the pivot's value
    lo = equal;
  }
  std::sort(a + lo, a + hi);
}

}  // namespace

MiddleValues SelectMiddle(double* values, std::size_t n) {
  MiddleValues m;
  bool nan = false;
  for (std::size_t i = 0; i < n; ++i) nan |= values[i] != values[i];
  if (nan || n == 0) {
    m.nan = nan;
    return m;
  }
  const std::size_t r_hi = n / 2;
  SelectRank(values, n, r_hi);
  m.hi = values[r_hi];
  m.lo = n % 2 == 1 ? m.hi : *std::max_element(values, values + r_hi);
  return m;
}

}  // namespace spexd::core::internal
