#include "cuda/host/frames_in_flight.h"

#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace spexd::cuda {
namespace {

struct Counts {
  absl::Mutex mu;
  std::map<int, int> by_device ABSL_GUARDED_BY(mu);
};

Counts& Shared() {
  static Counts* counts = new Counts;  // never destroyed: backends may outlive statics
  return *counts;
}

}  // namespace

FrameInFlight::FrameInFlight(int device) : device_(device) {
  Counts& c = Shared();
  absl::MutexLock lock(&c.mu);
  alone_ = c.by_device[device]++ == 0;
}

FrameInFlight::~FrameInFlight() {
  Counts& c = Shared();
  absl::MutexLock lock(&c.mu);
  --c.by_device[device_];
}

int FramesInFlight(int device) {
  Counts& c = Shared();
  absl::MutexLock lock(&c.mu);
  const auto it = c.by_device.find(device);
  return it == c.by_device.end() ? 0 : it->second;
}

StreamPriorities FramePriorities(bool alone) {
  StreamPriorities p;
  p.compute = p.prep = p.tail = alone;
  return p;
}

}  // namespace spexd::cuda
