// The CPU patch stages' timer (PatchWorkspace::StepSeconds).
#ifndef SPEXD_CORE_CPU_INTERNAL_STEP_TIMER_H_
#define SPEXD_CORE_CPU_INTERNAL_STEP_TIMER_H_

#include <time.h>

namespace spexd::core::internal {

// Adds the calling thread's CPU time since the last Lap() to *slot: CPU rather than wall
// time, so that a loaded or oversubscribed machine does not inflate the steps.
class StepTimer {
 public:
  StepTimer() : t_(ThreadCpuSeconds()) {}
  void Lap(double* slot) {
    const double now = ThreadCpuSeconds();
    *slot += now - t_;
    t_ = now;
  }

 private:
  static double ThreadCpuSeconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  double t_;
};

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_STEP_TIMER_H_
