#include "cuda/host/gpu_context.h"

#include "absl/strings/str_cat.h"
#include "cuda/host/cuda_check.h"
#include "cuda/host/sleep_poll.h"

namespace spexd::cuda {

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

absl::Status Stream::Create(int priority) {
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
  return absl::OkStatus();
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

absl::Status Event::Create(bool timing) {
  SPEXD_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  return absl::OkStatus();
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
}

absl::Status CublasHandle::Create(cudaStream_t stream) {
  SPEXD_CUDA_RETURN_IF_ERROR(cublasCreate(&handle_));
  SPEXD_CUDA_RETURN_IF_ERROR(cublasSetStream(handle_, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
  return absl::OkStatus();
}

namespace {

// The device's scheduling flag for `wait`, set on the current device and read back: CUDA
// 12+ overwrites the flags of an initialised primary context, and a driver that does not
// is reported rather than silently ignored.
absl::Status SetHostWait(int device, core::CudaHostWait wait) {
  unsigned flag = 0;
  switch (wait) {
    case core::CudaHostWait::kAuto: return absl::OkStatus();
    case core::CudaHostWait::kBlock: flag = cudaDeviceScheduleBlockingSync; break;
  }
  SPEXD_CUDA_RETURN_IF_ERROR(cudaSetDeviceFlags(flag));
  unsigned now = 0;
  SPEXD_CUDA_RETURN_IF_ERROR(cudaGetDeviceFlags(&now));
  if ((now & cudaDeviceScheduleMask) != flag) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", device, " kept scheduling flags ", now & cudaDeviceScheduleMask,
        " after a request for ", flag, " (GPU host wait '", core::Name(wait), "')"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuContext>> GpuContext::Create(int device, core::CudaHostWait wait) {
  int count = 0;
  SPEXD_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", device, " does not exist (", count, " visible)"));
  }
  std::unique_ptr<GpuContext> ctx(new GpuContext());
  ctx->device_ = device;
  ctx->wait_ = wait;
  SPEXD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  if (absl::Status w = SetHostWait(device, wait); !w.ok()) return w;
  cudaDeviceProp prop{};
  SPEXD_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  ctx->device_name_ = prop.name;
  ctx->total_memory_ = prop.totalGlobalMem;
  ctx->sm_count_ = prop.multiProcessorCount;
  ctx->arch_ = 10 * prop.major + prop.minor;
  // The kernels multiply on the FP64 tensor cores (mma.sync .f64), which begin with the
  // A100; the module holds no code for older GPUs.
  if (prop.major < 8) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", device, " (", ctx->device_name_, ") has compute capability ",
        prop.major, ".", prop.minor, "; spexd's CUDA backend needs 8.0 or newer (an A100, "
        "H100, H200 or later: FP64 tensor cores)"));
  }
  int least = 0, greatest = 0;
  SPEXD_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  absl::Status s = ctx->compute_default_.Create(least);
  if (s.ok()) s = ctx->compute_high_.Create(greatest);
  // The copy stream runs the upload's widening kernels and the download's narrowing: at
  // the default priority their blocks trickle in beside the first batch's Cholesky and slow
  // each of its steps; at the greatest they run at once (a few tenths of a ms).
  if (s.ok()) s = ctx->copy_.Create(greatest);
  if (s.ok()) s = ctx->tail_default_.Create(least);
  if (s.ok()) s = ctx->tail_high_.Create(greatest);
  if (s.ok()) s = ctx->prep_default_.Create(least);
  if (s.ok()) s = ctx->prep_high_.Create(greatest);
  if (s.ok()) s = ctx->cublas_.Create(ctx->compute());
  if (!s.ok()) return s;
  return ctx;
}

cudaError_t GpuContext::SynchronizeStreams() const {
  cudaError_t worst = cudaSuccess;
  for (cudaStream_t s : {compute_default_.get(), compute_high_.get(), tail_default_.get(),
                         tail_high_.get(), copy(), prep_default_.get(), prep_high_.get()}) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (worst == cudaSuccess || (IsStickyError(e) && !IsStickyError(worst))) worst = e;
  }
  return worst;
}

cudaError_t GpuContext::WaitForEvent(cudaEvent_t event) const {
  if (wait_ == core::CudaHostWait::kAuto) return cudaEventSynchronize(event);
  return SleepPoll([event] { return cudaEventQuery(event); }, cudaErrorNotReady);
}

absl::Status GpuContext::SetStreamPriorities(const StreamPriorities& p) {
  const Stream* compute = p.compute ? &compute_high_ : &compute_default_;
  const Stream* prep = p.prep ? &prep_high_ : &prep_default_;
  const Stream* tail = p.tail ? &tail_high_ : &tail_default_;
  if (compute != compute_) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_->get()));
    SPEXD_CUDA_RETURN_IF_ERROR(cublasSetStream(cublas_.get(), compute->get()));
    compute_ = compute;
  }
  if (prep != prep_) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(prep_->get()));
    prep_ = prep;
  }
  if (tail != tail_) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(tail_->get()));
    tail_ = tail;
  }
  return absl::OkStatus();
}

absl::Status GpuContext::Activate() const {
  SPEXD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return absl::OkStatus();
}

}  // namespace spexd::cuda
