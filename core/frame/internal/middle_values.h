// The two middle values of an array, for numpy's median (core::Median, the specmask's
// medians, the RAW scores): a frame takes about 1500 medians of 500-2900 values.
// std::nth_element over a random array mispredicts half its partition branches; these
// partitions have none, 3x faster at 2300 values (a tenth of a GPU host's samples went to
// the medians).
#ifndef SPEXD_CORE_FRAME_INTERNAL_MIDDLE_VALUES_H_
#define SPEXD_CORE_FRAME_INTERNAL_MIDDLE_VALUES_H_

#include <cstddef>

namespace spexd::core::internal {

struct MiddleValues {
  double lo = 0, hi = 0;  // the values of ranks (n - 1) / 2 and n / 2 in ascending order
  bool nan = false;       // a value is NaN (lo and hi unset): numpy's median is NaN
};

// The middle values of values[0, n) (n >= 1), reordering them. The values are those a sort
// puts at the two ranks (-0.0 and 0.0 compare equal: either may stand for a middle zero).
MiddleValues SelectMiddle(double* values, std::size_t n);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_FRAME_INTERNAL_MIDDLE_VALUES_H_
