// State shared by the gRPC services (owned by SpexdServer): the job environment, the
// scheduler, the serving state and what GetServerInfo reports.
#ifndef SPEXD_SERVER_SERVICE_CONTEXT_H_
#define SPEXD_SERVER_SERVICE_CONTEXT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

#include "server/jobs/extract_job.h"

namespace spexd::server {

class CallWatchdog;
class RegionRegistry;
class Scheduler;

struct ServiceContext {
  JobEnvironment env;
  Scheduler* scheduler = nullptr;
  CallWatchdog* watchdog = nullptr;  // ends calls whose client stalled
  RegionRegistry* regions = nullptr;  // registered CUDA regions
  // Expected bearer token; empty means no token is required.
  std::string auth_token;
  // Warm-up finished (backends created, PSFs preloaded) and not draining.
  std::atomic<bool> serving{false};
  std::atomic<bool> draining{false};
  // For GetServerInfo.
  bool tls = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // Set by warm-up, read by GetServerInfo at any time.
  void SetBackendChoice(int gpus, const std::string& choice) {
    absl::MutexLock lock(&info_mu);
    gpu_count = gpus;
    backend_choice = choice;
  }
  std::pair<int, std::string> BackendChoice() {
    absl::MutexLock lock(&info_mu);
    return {gpu_count, backend_choice};
  }

 private:
  absl::Mutex info_mu;
  int gpu_count ABSL_GUARDED_BY(info_mu) = 0;
  std::string backend_choice ABSL_GUARDED_BY(info_mu) = "warming up";
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SERVICE_CONTEXT_H_
