// The extraction backend interface (CPU here, CUDA in cuda/) and its factory.
#ifndef SPEXD_CORE_BACKEND_H_
#define SPEXD_CORE_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend/backend_options.h"
#include "core/backend/device_region.h"
#include "core/plan/extraction_params.h"
#include "core/frame/extraction_result.h"
#include "core/plan/geometry.h"
#include "core/io/preproc.h"

namespace spexd::core {

struct ExtractionJob {
  std::shared_ptr<const Geometry> geometry;
  const PreprocImage* image = nullptr;  // must match the geometry's image shape
  // When set, the image and ivar are read from device memory instead and
  // `image` carries only the shape and metadata (its planes are empty). Backends without
  // device access refuse it with FAILED_PRECONDITION.
  const DeviceImageInput* device_image = nullptr;
  // Per-request settings (geometry-independent).
  double regularize = 0.0;
  double psferr = 0.01;
  bool want_model = false;
  // kFileBytes: nothing but the job's frame file reads the resolution data;
  // kStreamFloat32: nothing but its float32 stream does. A backend may then hand each
  // bundle's RESOLUTION as that consumer's bytes instead (BundleResult::rdiags_file or
  // rdiags_f32, rdiags empty), narrowed where it was computed (the CUDA backend: on the
  // device, downloading half the bytes). A backend that does not keeps rdiags, and the
  // consumer narrows them.
  ResolutionForm resolution_form = ResolutionForm::kFloat64;
  // Bundles to extract (plan indices, ascending); empty means all.
  std::vector<int> bundles;
  // Checked between patches (CPU) or patch batches (CUDA), so that a cancel or a
  // deadline frees the worker within one patch batch: when set, Extract stops with
  // CANCELLED.
  const std::atomic<bool>* cancel = nullptr;
};

inline bool CancelRequested(const ExtractionJob& job) {
  return job.cancel != nullptr && job.cancel->load(std::memory_order_relaxed);
}

struct ExtractionSummary {
  PatchCounts counts;
  // What the pixel rules did to an image with raw planes, which the backend rules
  // (PreprocImage::n_masked, n_nonfinite); -1 when the host applied them.
  int64_t pixels_masked = -1;
  int64_t pixels_nonfinite = -1;
  double seconds = 0;
  std::map<std::string, double> stage_seconds;  // where the time went
};

// Receives each finished bundle, in ascending bundle order, one call at a time, not
// necessarily on the thread that called Extract (the CPU backend sinks a bundle from the
// thread that finished it). Returning an error stops the extraction with that error.
using BundleSink = std::function<absl::Status(BundleResult&& bundle)>;

// Device memory a backend holds (Backend::Memory). Host memory is the caller's to measure.
struct BackendMemory {
  int device = -1;           // device ordinal; -1 when the backend holds no device memory
  int64_t device_bytes = 0;  // everything it holds: workspace plus warm geometry state
  // Warm device state (spots, uploaded plan) per geometry, keyed by the Geometry it was
  // built from. Only geometries still alive are listed (the backend keeps a weak
  // reference), so a key never names a freed object whose address was reused.
  std::map<const Geometry*, int64_t> geometry_bytes;
};

// What only a backend on a GPU offers (the CUDA backend, cuda/): float32 planes from
// pinned host memory, and other processes' device memory. Backend::gpu()
// returns it, or null for a backend without one (the CPU backend); the defaults are
// those of a backend that cannot do the thing.
class GpuCapabilities {
 public:
  virtual ~GpuCapabilities() = default;
  // Pins host memory for this backend's device (PlaneBufferPool::set_pinner): float32
  // planes decoded into pinned blocks are uploaded without a host staging copy. Null
  // (the default): the backend gains nothing from pinned planes.
  virtual std::shared_ptr<PlaneMemoryPinner> PlanePinner() { return nullptr; }
  // Maps another process's device allocation (a CUDA IPC handle of kCudaIpcHandleBytes
  // bytes) for use as extraction input or output on this backend's device. Thread-safe
  // and never waits for an extraction. FAILED_PRECONDITION when `device` is not its
  // device, or when the handle cannot be opened (stale: the producer freed it or exited)
  // or its allocation is smaller than `size`; INVALID_ARGUMENT for a malformed handle.
  // Default: FAILED_PRECONDITION.
  virtual absl::StatusOr<std::unique_ptr<ImportedRegion>> ImportRegion(const std::string& ipc_handle,
                                                                       int device, uint64_t size);
};

// Every backend: extraction, health, the memory it holds and the warm state it keeps per
// geometry (empty for the CPU backend). The GPU-only part is GpuCapabilities.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Extracts the job's bundles. Results are in photons per bin (FinalizeBundle is the
  // caller's). Returns INVALID_ARGUMENT for a job that does not fit the geometry,
  // CANCELLED when job.cancel was set, INTERNAL for a device failure.
  virtual absl::StatusOr<ExtractionSummary> Extract(const ExtractionJob& job,
                                                    const BundleSink& sink) = 0;
  // False after an unrecoverable (sticky) device error.
  virtual bool healthy() const { return true; }
  // Human-readable description (device name, threads, memory).
  virtual std::string description() const { return name(); }
  // Whether Extract takes an image with float32 planes (PreprocImage::image32/ivar32, from
  // PreprocOptions::keep_float32: what preproc files store, no widened copy on the host).
  // A backend that does not refuses one (ValidateJob): widen it first (WidenPlanes).
  // Default: float64 planes only; the CPU and CUDA backends take both.
  virtual bool TakesFloat32Planes() const { return false; }
  // Whether Extract takes an image with raw planes (PreprocImage::image_raw, from
  // PreprocOptions::keep_raw): the file's big-endian float32 bytes and the MASK bits, whose
  // byte order, widening and pixel rules the backend does itself (the CUDA backend: on the
  // device). A backend that does not refuses one (ValidateJob): decode it first
  // (DecodeRawPlanes). Default: no; the CUDA backend takes them.
  virtual bool TakesRawPlanes() const { return false; }

  // Device memory held now. Thread-safe: may be called from any thread, also while
  // Extract runs on another, and never waits for an extraction. Default: none.
  virtual BackendMemory Memory() const { return {}; }
  // Frees the warm device state built for `geometry` (the PSF was unloaded or evicted).
  // Thread-safe and never waits for an extraction: when one is running, the state is
  // freed as soon as it ends. A later Extract of the same geometry builds it again (and
  // frees it again when it ends). Default: nothing to free.
  virtual void Release(const std::shared_ptr<const Geometry>& geometry) { (void)geometry; }

  // The GPU-only part of this backend; null (the default) for a backend without a GPU.
  // Owned by the backend, valid as long as it is.
  virtual GpuCapabilities* gpu() { return nullptr; }
};

// Creates a backend. For BackendKind::kCuda the module is dlopen()ed (docs/design.md); UNAVAILABLE
// with the reason when the module, the driver or a device is missing.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

// Whether `backend` takes float32 planes (Backend::TakesFloat32Planes).
bool TakesFloat32Planes(Backend& backend);
// Whether `backend` takes raw planes (Backend::TakesRawPlanes).
bool TakesRawPlanes(Backend& backend);

// GpuCapabilities::ImportRegion of `backend`; FAILED_PRECONDITION naming the backend
// when it has no GPU.
absl::StatusOr<std::unique_ptr<ImportedRegion>> ImportRegion(Backend& backend,
                                                             const std::string& ipc_handle,
                                                             int device, uint64_t size);

// Validates a job against its geometry (shared by every backend). An image with float32
// planes is refused (FAILED_PRECONDITION) unless `float32_planes_ok`, one with raw planes
// unless `raw_planes_ok`.
absl::Status ValidateJob(const ExtractionJob& job, bool float32_planes_ok = false,
                         bool raw_planes_ok = false);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BACKEND_H_
