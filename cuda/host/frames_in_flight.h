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

// Which of a frame's streams run at the device's greatest priority
// (GpuContext::SetStreamPriorities); the others at the default.
struct StreamPriorities {
  bool compute = false;  // the factorisations and inverse blocks
  bool prep = false;     // the next batch's normal equations
  bool tail = false;     // the eigen stages, decorrelation products and model
};

// A lone frame (the latency mode) runs all three at the greatest priority: the tail is
// on the frame's critical path as much as the compute stream (each batch's eigen stages
// follow its factorisation, the last batch's run alone at the end), and at the default it
// waited behind the next batch's factorisation (0.8 ms a frame on an H200). Frames that
// share the GPU keep the default on all three, which gives the most frames a second.
StreamPriorities FramePriorities(bool alone);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_FRAMES_IN_FLIGHT_H_
