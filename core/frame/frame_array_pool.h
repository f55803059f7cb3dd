// Per-bin arrays of assembled frames (FrameAssembler) kept for the next frames. A server
// assembles a frame for every server-written file: an r frame's flux, ivar, chi2pix and
// pixmask_fraction are 9.3 MB each, with the failed bins and the specmask beside them.
// Allocated afresh every frame, glibc gave them back to the kernel between frames and the
// assembler faulted them in again, zeroed (3 % of a two-GPU host's samples serving
// server-written frames). Thread-safe.
#ifndef SPEXD_CORE_FRAME_FRAME_ARRAY_POOL_H_
#define SPEXD_CORE_FRAME_FRAME_ARRAY_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/frame/frame.h"

namespace spexd::core {

class FrameArrayPool {
 public:
  explicit FrameArrayPool(int64_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {}
  // A new bound (sets beyond it are freed as they come back).
  void set_max_idle_bytes(int64_t bytes);

  // Moves the most recently recycled set into `frame`'s per-bin arrays (flux, ivar, rdiags,
  // pixmask_fraction, chi2pix, mask, failed_bins), which must be empty; they come empty
  // (size 0) with their capacity. False when none is idle.
  bool Lend(Frame* frame);
  // Takes `frame`'s per-bin arrays (its sizes dropped, its capacity kept) while the idle
  // sets stay under the bound; `frame` keeps empty arrays. Never throws.
  void Recycle(Frame* frame) noexcept;

  int64_t idle_bytes();
  int64_t lent();  // Lend calls that found a set

 private:
  struct ArraySet {
    std::vector<double> flux, ivar, rdiags, pixmask_fraction, chi2pix;
    std::vector<uint32_t> mask;
    std::vector<uint8_t> failed_bins;
    int64_t bytes() const;
  };
  static void Swap(ArraySet& set, Frame& frame);

  absl::Mutex mu_;
  int64_t max_idle_bytes_ ABSL_GUARDED_BY(mu_);
  std::vector<ArraySet> idle_ ABSL_GUARDED_BY(mu_);  // most recently recycled last
  int64_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lent_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_FRAME_ARRAY_POOL_H_
