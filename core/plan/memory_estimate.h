// Host memory an extraction will need, estimated from its parameters before anything is
// allocated, so that an over-budget request is refused up front (without
// it, nwavestep = 1e8 would take 4.9 GB before failing).
#ifndef SPEXD_CORE_MEMORY_ESTIMATE_H_
#define SPEXD_CORE_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>

#include "core/plan/extraction_params.h"

namespace spexd::core {

class Psf;

// Upper estimates in bytes; each term is the largest buffer set of its kind.
struct MemoryEstimate {
  double plan = 0;       // patch descriptors and stamp corners of every fibre (PatchPlan)
  double spots = 0;      // spots of the bundles in flight (two: one evaluated, one in use)
  double results = 0;    // bundle arrays of every requested fibre (flux .. failed flags)
  double model = 0;      // model image (want_model only)
  double workspace = 0;  // per-patch solver buffers of every thread (dense n x n normal matrix)
  double total() const { return plan + spots + results + model + workspace; }
  // "plan 1.2 MB, spots ...": for error messages.
  std::string Describe() const;
};

// For a validated request (so every product below is small enough for a double to be
// exact enough). `image_pixels`: height x width of the image (or an upper bound when not
// known yet); `threads`: patches solved at once.
MemoryEstimate EstimateMemory(const ExtractionPlan& request, const Psf& psf,
                              int64_t image_pixels, int threads);

}  // namespace spexd::core

#endif  // SPEXD_CORE_MEMORY_ESTIMATE_H_
