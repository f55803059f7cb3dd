// Pixel-integrated PSF stamps ("spots") and their corner pixels: extraction-spec §1.4.
#ifndef SPEXD_CORE_SPOTS_H_
#define SPEXD_CORE_SPOTS_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/io/psf.h"

namespace spexd::core {

class TaskPool;

// The lower-left corner of a stamp from its trace position (spec §1.4 step 2):
// floor(pos - hsize + 0.5), in that operation order. The one definition shared by the spot
// evaluation, the planner and the simulator, so that all agree exactly.
inline int32_t StampCorner(double pos, int hsize) {
  return static_cast<int32_t>(std::floor((pos - static_cast<double>(hsize)) + 0.5));
}

// Spots of `nfibers` consecutive fibres starting at `fiber_begin` on `nwave` wavelengths.
struct Spots {
  int fiber_begin = 0;
  int nfibers = 0;
  int nwave = 0;
  int ny = 0;  // 2*hsizey+1 stamp rows
  int nx = 0;  // 2*hsizex+1 stamp columns
  std::vector<double> values;  // [nfibers][nwave][ny][nx], normalised stamps
  std::vector<int32_t> xc;     // [nfibers][nwave] lower-left corner column
  std::vector<int32_t> yc;     // [nfibers][nwave] lower-left corner row

  const double* stamp(int f, int w) const {
    return values.data() + (static_cast<std::size_t>(f) * nwave + w) * ny * nx;
  }
  // Host bytes of `nstamps` stamps of ny x nx with their corners (values + xc + yc).
  static std::size_t Bytes(std::size_t nstamps, int ny, int nx) {
    return nstamps * (static_cast<std::size_t>(ny) * nx * sizeof(double) + 2 * sizeof(int32_t));
  }
  std::size_t MemoryBytes() const {
    return values.size() * sizeof(double) + (xc.size() + yc.size()) * sizeof(int32_t);
  }
  int32_t corner_x(int f, int w) const { return xc[static_cast<std::size_t>(f) * nwave + w]; }
  int32_t corner_y(int f, int w) const { return yc[static_cast<std::size_t>(f) * nwave + w]; }
};

// Evaluates the spots of fibres [fiber_begin, fiber_begin + nfibers) on `waves`, on the
// calling thread and `pool`'s threads (core/base/parallel_for.h; null: the caller alone).
// Pure function of its inputs, bit-identical for any pool; cost is linear in
// nfibers*waves.size(). Callers keep the result for the lifetime of a (PSF, grid) pair.
Spots EvaluateSpots(const Psf& psf, int fiber_begin, int nfibers,
                    const std::vector<double>& waves, TaskPool* pool = nullptr);

// One stamp (helper for EvaluateSpots, exposed for tests and the simulator):
// writes ny*nx values into `stamp` and returns the corner.
void EvaluateSpot(const Psf& psf, int fiber, double wave, double* stamp, int32_t* xc,
                  int32_t* yc);

// Reusable single-stamp evaluator: holds the per-thread scratch so that evaluating many
// stamps one at a time (e.g. the simulator) does not allocate per stamp. Not thread-safe;
// use one per thread. `psf` must outlive it. Results are bit-identical to EvaluateSpot.
class SpotEvaluator {
 public:
  explicit SpotEvaluator(const Psf& psf);
  ~SpotEvaluator();
  SpotEvaluator(const SpotEvaluator&) = delete;
  SpotEvaluator& operator=(const SpotEvaluator&) = delete;

  int ny() const { return 2 * psf_.hsizey() + 1; }
  int nx() const { return 2 * psf_.hsizex() + 1; }
  // Writes ny()*nx() values into `stamp` and the corner into xc, yc.
  void Evaluate(int fiber, double wave, double* stamp, int32_t* xc, int32_t* yc);

  struct Workspace;  // opaque scratch, defined in spots.cc

 private:
  const Psf& psf_;
  std::unique_ptr<Workspace> ws_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_SPOTS_H_
