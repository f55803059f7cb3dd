// Frames in flight per CUDA device, counted across the backends of this process (the
// service's backends a GPU, the benchmark's frames in flight): a frame that starts with
// no other on its GPU takes the lone-frame latency mode (cuda_backend.cc),
// which shortens it but costs throughput when frames share the GPU. Host code only.
#ifndef SPEXD_CUDA_FRAMES_IN_FLIGHT_H_
#define SPEXD_CUDA_FRAMES_IN_FLIGHT_H_

namespace spexd::cuda {

// Counts a frame on `device` from construction to destruction.
class FrameInFlight {
 public:
  explicit FrameInFlight(int device);
  ~FrameInFlight();
  FrameInFlight(const FrameInFlight&) = delete;
  FrameInFlight& operator=(const FrameInFlight&) = delete;
  // No other frame was in flight on the device when this one started.
  bool alone() const { return alone_; }

 private:
  int device_;
  bool alone_;
};

// The frames in flight on `device` now (tests, diagnostics).
int FramesInFlight(int device);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_FRAMES_IN_FLIGHT_H_
