// How many geometries (GeometryState: a PSF's plan and its spots, ~1.8-2.3 GB for a full
// DESI frame) a CUDA backend keeps warm: as many as device memory allows, not a fixed
// count. An exposure has 30 PSFs: with a fixed two, a repeated exposure rebuilds the
// spots of nearly every frame. A new state is built only after enough of the
// least recently used ones are dropped that it fits while a reserve of the device stays
// free: the workspaces of the backends sharing the GPU (BatchExtractor sizes its batches
// from the free memory) and a frame's image. Host code only (no CUDA headers).
#ifndef SPEXD_CUDA_WARM_GEOMETRIES_H_
#define SPEXD_CUDA_WARM_GEOMETRIES_H_

#include <cstddef>
#include <vector>

#include "core/plan/patch_plan.h"

namespace spexd::cuda {

// Warm states a backend keeps at most, whatever the memory (a bound on the linear
// look-up and on the device memory one backend may take from its neighbours).
inline constexpr int kMaxWarmGeometries = 64;
// Fraction of the device's memory left free by the warm states.
inline constexpr double kWarmReserveFraction = 0.25;

// Device bytes of a state built for `plan` (GeometryState::Create's allocations: the patch
// plan, the stamp corners and the spots of every fibre at every wavelength of the grid).
std::size_t GeometryStateBytes(const core::PatchPlan& plan);

// How many of the warm states (`warm_bytes`: each state's device bytes, most recently used
// first) to drop, least recently used first, before a state of `new_bytes` is built on a
// device with `free_bytes` free of `total_bytes`: until fewer than kMaxWarmGeometries are
// left and the new one fits in what is free plus what the dropped ones held, with
// kWarmReserveFraction of the device to spare. All of them when even that is not enough
// (the build then reports its own RESOURCE_EXHAUSTED).
// `max_states` replaces kMaxWarmGeometries (a test setting, SPEXD_TEST_CUDA_FAULTS).
int WarmStatesToDrop(const std::vector<std::size_t>& warm_bytes, std::size_t new_bytes,
                     std::size_t free_bytes, std::size_t total_bytes,
                     int max_states = kMaxWarmGeometries);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_WARM_GEOMETRIES_H_
