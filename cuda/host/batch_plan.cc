#include "cuda/host/batch_plan.h"

#include <algorithm>

namespace spexd::cuda {

std::vector<int> BatchSizes(int nbundles, int per_batch) {
  std::vector<int> sizes;
  if (nbundles <= 0) return sizes;
  per_batch = std::max(per_batch, 1);
  const int nbatches = (nbundles + per_batch - 1) / per_batch;
  for (int k = 0; k < nbatches; ++k) sizes.push_back(nbundles / nbatches + (k < nbundles % nbatches ? 1 : 0));
  if (nbatches >= 3 && sizes[nbatches - 2] < per_batch && sizes[nbatches - 1] > 3) {
    ++sizes[nbatches - 2];
    --sizes[nbatches - 1];
  }
  return sizes;
}

}  // namespace spexd::cuda
