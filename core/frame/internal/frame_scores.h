// The RAW scores desispec attaches to an extracted frame (SCORES HDU): desi_extract_spectra
// calls desispec.specscore.compute_and_append_frame_scores(frame, suffix="RAW") with its
// default flux_per_angstrom=False, on the float64 per-Angstrom fluxes before they are
// written as float32. Same definitions here, with the order of operations numpy uses for
// desispec's expressions, so that the Python client (which evaluates them with numpy)
// gets the same bits.
#ifndef SPEXD_CORE_FRAME_SCORES_H_
#define SPEXD_CORE_FRAME_SCORES_H_

#include <string>
#include <vector>

#include "core/base/task_pool.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"  // FrameScore

namespace spexd::core {

// Camera band ("b", "r" or "z") from the mean wavelength, as desispec's auto-detection:
// b up to 5800 A, z from 7600 A, r in between.
char ScoreBand(const std::vector<double>& wave);

// SUM_RAW_COUNT_<B>, MEDIAN_RAW_COUNT_<B>, MEDIAN_RAW_SNR_<B> over the band's top hat
// [lo, hi) (b 4000-5800, r 5800-7600, z 7600-9800 A), with dwave = numpy.gradient(wave):
//   SUM    = sum of flux over the band bins (in wavelength order);
//   COUNT  = median of flux / dwave;
//   SNR    = median of sqrt(max(ivar, 0)) * flux / sqrt(dwave).
// MASK plays no part (desispec's definition). Empty when no bin falls in the band
// (desispec raises there; spexd then writes no SCORES HDU). The fibres are spread over
// `pool` with up to `max_workers` workers (core::ParallelFor; null: the calling thread);
// each fibre's values do not depend on it.
std::vector<FrameScore> ComputeRawScores(const Frame& frame, TaskPool* pool = nullptr,
                                         int max_workers = 1);
// The same of `nspec` rows ([nspec][nwave] flux and ivar, read in place: a bundle's rows
// need no copy into a Frame) on the grid `wave` (nwave values).
std::vector<FrameScore> ComputeRawScores(const double* flux, const double* ivar, int nspec,
                                         int nwave, const std::vector<double>& wave,
                                         TaskPool* pool = nullptr, int max_workers = 1);

// numpy's pairwise float64 summation (add.reduce over a contiguous axis: numpy.mean of
// the grid) and
// numpy.median (mean of the two middle values for even sizes, computed as (a + b) / 2;
// NaN when a value is NaN or there is none).
double NumpySum(const double* values, std::size_t n);
double NumpyMedian(std::vector<double> values);
// The same of values[0, n), reordering them (a scratch array: no copy).
double NumpyMedianInPlace(double* values, std::size_t n);

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_SCORES_H_
