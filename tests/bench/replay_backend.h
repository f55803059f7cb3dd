// A backend of the benchmarks' own that stands in for the GPU: the first extraction of each
// kind of frame is computed by the CPU backend and kept, and every later one replays those
// results, so that the host's part of a served frame (reading, decoding, finalising,
// streaming, writing) can be measured on a machine without a GPU, at a pace no CPU
// extraction would allow. Results reach the sink in arrays lent by a pool and filled by a
// copy, as the CUDA backend lends them and fills them from the device; that copy's CPU time
// is counted (ReplayStore::copy_cpu_seconds) so that a report can set it apart.
// Never part of the product: tests/bench only.
#ifndef SPEXD_TESTS_BENCH_REPLAY_BACKEND_H_
#define SPEXD_TESTS_BENCH_REPLAY_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/backend/backend.h"
#include "core/frame/bundle_array_pool.h"
#include "core/io/plane_buffer.h"

namespace spexd::bench {

// The recorded results (computed once, or read from a file a run stored), shared by every replay backend of a server: frames of the same
// shape (CCD, wavelength grid, bundles, model or not) replay the same results, whatever
// their PSF, since the host's work depends only on the shapes.
class ReplayStore {
 public:
  // `recorder_threads`: the CPU backend's threads for the recordings (0: all cores).
  // `dir` (may be empty: kept in memory only): where recordings are stored, one file per
  // shape, and found again by later runs.
  ReplayStore(int recorder_threads, std::string dir)
      : recorder_threads_(recorder_threads), dir_(std::move(dir)) {}

  // The results of every bundle of the job's plan for a job of this shape, recorded
  // with the CPU backend on first use (one recording at a time).
  absl::StatusOr<std::shared_ptr<const std::vector<core::BundleResult>>> Results(
      const core::ExtractionJob& job);

  // CPU seconds spent copying recorded results into lent arrays, on every thread.
  double copy_cpu_seconds() const {
    return static_cast<double>(copy_ns_.load(std::memory_order_relaxed)) * 1e-9;
  }
  void AddCopyNanoseconds(int64_t ns) { copy_ns_.fetch_add(ns, std::memory_order_relaxed); }
  int recordings() const;

 private:
  const int recorder_threads_;
  const std::string dir_;
  mutable absl::Mutex mu_;
  std::unique_ptr<core::Backend> recorder_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const std::vector<core::BundleResult>>> recorded_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> copy_ns_{0};
};

// Replays `store`'s results. Takes float32 and raw planes, as the CUDA backend does (the
// host decodes neither); holds no device
// memory. A cancel is honoured between bundles.
class ReplayBackend final : public core::Backend {
 public:
  explicit ReplayBackend(std::shared_ptr<ReplayStore> store)
      : store_(std::move(store)), arrays_(core::BundleArrayPool::Create()) {}
  std::string name() const override { return "replay"; }
  std::string description() const override {
    return "replay of CPU-backend results (benchmark stand-in for a GPU)";
  }
  bool TakesFloat32Planes() const override { return true; }
  bool TakesRawPlanes() const override { return true; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override;

 private:
  std::shared_ptr<ReplayStore> store_;
  std::shared_ptr<core::BundleArrayPool> arrays_;
  core::PlaneBufferPool words_{int64_t{256} << 20};  // the resolution words' blocks
};

}  // namespace spexd::bench

#endif  // SPEXD_TESTS_BENCH_REPLAY_BACKEND_H_
