// How many bundles each batch of a request takes (BatchExtractor::Batches). No CUDA: the
// host tests check it directly.
#ifndef SPEXD_CUDA_BATCH_PLAN_H_
#define SPEXD_CUDA_BATCH_PLAN_H_

#include <vector>

namespace spexd::cuda {

// The sizes of the batches `nbundles` bundles run in, at most `per_batch` each (>= 1):
// the fewest batches, as equal as they can be
// (20 bundles as 5,5,5,5 took 0.0855 s on an H100, 6,6,6,2 0.0869 s: a short last batch
// pays the latency of a whole batch for a tenth of the work), except that with three
// batches or more the last gives one bundle to the one before it where that fits and it
// keeps three: the last batch's eigen stage, finalise and fill run alone at the request's
// end, the one before overlaps the last one's head (5,5,6,4 took
// 0.0495-0.0496 s on an H100 where 5,5,5,5 took 0.0496-0.0499 in four interleaved rounds).
std::vector<int> BatchSizes(int nbundles, int per_batch);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_BATCH_PLAN_H_
