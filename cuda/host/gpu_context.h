// RAII wrappers of CUDA streams, events and library handles, and the GpuContext that
// groups them for one backend instance (docs/design.md "Conventions"; Ceres'
// context_impl.h). Stream rules: `compute` runs every kernel and library call and is
// bound to the cuBLAS handle; `tail` runs the last, library-free stages of a batch (QL,
// rotation, decorrelation products, model) so that they overlap the next batch's
// factorisations (patch_pipeline.h); `copy` carries the image's upload (and its widening)
// and the device->host result copies, so that they overlap the batches' compute, at the
// device's greatest priority. Nothing uses the default stream.
#ifndef SPEXD_CUDA_GPU_CONTEXT_H_
#define SPEXD_CUDA_GPU_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/backend/backend_options.h"
#include "cuda/host/frames_in_flight.h"

namespace spexd::cuda {

class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  // Non-blocking with respect to the legacy default stream; priority as
  // cudaStreamCreateWithPriority takes it (0: the default, lower numbers first).
  absl::Status Create(int priority = 0);
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : event_(o.event_) { o.event_ = nullptr; }
  ~Event();
  absl::Status Create(bool timing);
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle() = default;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();
  absl::Status Create(cudaStream_t stream);
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// One per backend instance; never shared across threads. Create() sets the device
// explicitly; callers that may run on another thread call Activate() first.
class GpuContext {
 public:
  // `wait` other than kAuto sets the device's scheduling flag (the primary context is
  // shared: the last backend created on a device sets it for all of them). The compute and
  // prep streams start at the default priority; SetStreamPriorities chooses them per frame.
  static absl::StatusOr<std::unique_ptr<GpuContext>> Create(
      int device, core::CudaHostWait wait = core::CudaHostWait::kAuto);
  absl::Status Activate() const;  // cudaSetDevice(device)
  // Waits for every stream (each one, whatever the others return); the first sticky
  // error if any (the context is lost), else the first error, else cudaSuccess.
  cudaError_t SynchronizeStreams() const;
  // Waits until `event` has completed: with kBlock by sleeping between queries
  // (sleep_poll.h: the driver's own wait spins), else cudaEventSynchronize.
  cudaError_t WaitForEvent(cudaEvent_t event) const;
  // Between frames only: compute() (the batches' factorisations), prep() and tail() each
  // become a stream of the device's greatest priority (`*_high`) or of the default, as
  // `p` says (frames_in_flight.h's FramePriorities); the copy stream stays at the greatest.
  // The cuBLAS handle follows the compute stream. Waits for the streams it leaves first,
  // so that nothing enqueued there can overtake the next frame's work.
  absl::Status SetStreamPriorities(const StreamPriorities& p);

  int device() const { return device_; }
  const std::string& device_name() const { return device_name_; }
  std::size_t total_memory() const { return total_memory_; }
  int sm_count() const { return sm_count_; }
  int arch() const { return arch_; }  // compute capability as 10 major + minor: 80, 90, 100
  cudaStream_t compute() const { return compute_->get(); }
  cudaStream_t copy() const { return copy_.get(); }
  cudaStream_t tail() const { return tail_->get(); }
  // The next batch's normal equations, ahead of the compute stream.
  cudaStream_t prep() const { return prep_->get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }

 private:
  GpuContext() = default;
  int device_ = 0;
  core::CudaHostWait wait_ = core::CudaHostWait::kAuto;
  std::string device_name_;
  std::size_t total_memory_ = 0;
  int sm_count_ = 0;
  int arch_ = 0;
  // Declaration order = reverse destruction order: handles go before their stream.
  Stream compute_default_;
  Stream compute_high_;
  const Stream* compute_ = &compute_default_;
  Stream copy_;
  Stream tail_default_;
  Stream tail_high_;
  const Stream* tail_ = &tail_default_;
  Stream prep_default_;
  Stream prep_high_;  // with compute_high_: the next batch's normal equations are on its path
  const Stream* prep_ = &prep_default_;
  CublasHandle cublas_;
};

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_GPU_CONTEXT_H_
