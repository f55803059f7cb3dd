// A wait for GPU work that sleeps between queries. With cudaDeviceScheduleBlockingSync
// set (core::CudaHostWait::kBlock), cudaEventSynchronize on a batch's downloads still
// spun in libcuda: on one H200 the CUDA workers spent ~0.07 CPU-s a frame under
// cuEventSynchronize (perf, DWARF call graphs, spexd_host_cost_bench, 8 clients), CPU the
// loads and the frame files need. Querying every ~200 us and sleeping in between costs a
// few microseconds a query, and the delay it adds never idles the GPU: the next batch is
// queued there before a batch's downloads are waited for (BatchExtractor::Run).
#ifndef SPEXD_CUDA_HOST_SLEEP_POLL_H_
#define SPEXD_CUDA_HOST_SLEEP_POLL_H_

#include <chrono>
#include <thread>

namespace spexd::cuda {

inline constexpr std::chrono::microseconds kSleepPollPeriod{200};

// Calls `query` until it returns something other than `not_ready` (a cudaEventQuery:
// cudaSuccess or an error), sleeping `period` between calls; returns that result.
template <typename Query, typename Result>
Result SleepPoll(Query query, Result not_ready,
                 std::chrono::microseconds period = kSleepPollPeriod) {
  for (;;) {
    const Result r = query();
    if (r != not_ready) return r;
    std::this_thread::sleep_for(period);
  }
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_HOST_SLEEP_POLL_H_
