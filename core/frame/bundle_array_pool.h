// Resident memory for the arrays of BundleResults, kept by a backend from bundle to bundle
// and frame to frame. A bundle's arrays of an r frame are ~7 MB (flux, ivar,
// pixmask_fraction, chi2pix and 11 resolution diagonals); freshly allocated, glibc maps
// them and the kernel faults and zeroes every page, then unmaps them once the bundle's
// consumer lets go. With eight workers of one process doing that (a 4-GPU node, two per
// GPU), the mapping calls and page faults contend on the process's memory-map lock and
// a worker's host stages took four times as long as with two workers. A bundle lent
// arrays here gives them back when its last copy is destroyed (BundleResult::recycler),
// on whichever thread that is (the streaming task, gRPC's writer, a file row writer).
#ifndef SPEXD_CORE_FRAME_BUNDLE_ARRAY_POOL_H_
#define SPEXD_CORE_FRAME_BUNDLE_ARRAY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/frame/extraction_result.h"

namespace spexd::core {

class BundleArrayPool final : public BundleArrayRecycler,
                              public std::enable_shared_from_this<BundleArrayPool> {
 public:
  // Idle arrays kept by default: about two r frames' bundles (~7 MB each), so that a
  // worker's next frame finds its arrays while the previous frame's consumers still hold
  // some of theirs.
  static constexpr int64_t kDefaultIdleBytes = int64_t{256} << 20;

  // Keeps at most `max_idle_bytes` of idle arrays (capacity, not size); arrays given back
  // beyond that are freed.
  static std::shared_ptr<BundleArrayPool> Create(int64_t max_idle_bytes = kDefaultIdleBytes);

  // Moves idle arrays into `bundle` (whose arrays must be empty, as a new BundleResult's)
  // and makes this pool its recycler, so that they come back when the bundle goes. Takes
  // the most recently returned set whose flux and rdiags can hold `bins` and
  // `bins * resolution_rows` values (0 rows: a bundle whose resolution comes as float32
  // bytes, which are a backend's PlaneBuffers), else the most recent one (it grows).
  // Returns whether any arrays were lent. Their sizes and contents are whatever they were:
  // the caller sizes and fills them (BundleResult::Allocate zero-fills; a copy that writes
  // every element needs only resize(), which costs nothing at an unchanged size).
  bool Lend(BundleResult* bundle, std::size_t bins, std::size_t resolution_rows);

  // BundleArrayRecycler: keeps the bundle's arrays while under the idle bound.
  void Recycle(BundleResult& bundle) noexcept override;

  struct Stats {
    int64_t lent = 0;      // Lend calls that found idle arrays
    int64_t missed = 0;    // Lend calls that found none
    int64_t recycled = 0;  // sets kept by Recycle
    int64_t dropped = 0;   // sets freed by Recycle (over the idle bound)
    int64_t idle_bytes = 0;
    int idle_sets = 0;
  };
  Stats stats();

 private:
  explicit BundleArrayPool(int64_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {}
  // A bundle's arrays (BundleResult::Allocate's), as given back.
  struct ArraySet {
    std::vector<double> flux, ivar, rdiags, pixmask_fraction, chi2pix;
    std::vector<uint8_t> failed_bins;
    int64_t bytes() const;
  };

  const int64_t max_idle_bytes_;
  absl::Mutex mu_;
  std::vector<ArraySet> idle_ ABSL_GUARDED_BY(mu_);  // most recently returned last
  int64_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_BUNDLE_ARRAY_POOL_H_
