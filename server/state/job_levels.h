// The scheduler's queues of jobs: two priority levels, each earliest deadline first, from
// which a worker takes the jobs it may run (Job::device()) and prefers one whose geometry
// it holds warm.
#ifndef SPEXD_SERVER_STATE_JOB_LEVELS_H_
#define SPEXD_SERVER_STATE_JOB_LEVELS_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <set>

#include "core/plan/geometry.h"
#include "server/state/job.h"

namespace spexd::server {

// A ready job may run before an earlier one of its priority level on a worker that holds
// its geometry warm only when it is due at most this much later (Job::deadline,
// Scheduler::OrderingDeadline): the frames of one exposure are, jobs with their own
// deadlines keep earliest deadline first.
inline constexpr std::chrono::milliseconds kWarmReorderSlack{2000};

struct QueuedJob {
  std::shared_ptr<Job> job;
  std::chrono::steady_clock::time_point admitted;
  bool realtime = false;
  int device = -1;  // Job::device()
  // Scheduler::OrderingDeadline: Job::deadline, or for a job without one its horizon.
  std::chrono::steady_clock::time_point due = std::chrono::steady_clock::time_point::max();
};

// Earliest deadline first per priority level (FIFO among equal deadlines); realtime first.
// A worker takes the first job it may run (Job::device()), so a job bound to a GPU waits
// for that GPU's worker. Not synchronised: the scheduler's lock guards it.
struct JobLevels {
  std::deque<QueuedJob> realtime, reprocessing;
  bool empty() const { return realtime.empty() && reprocessing.empty(); }
  std::size_t size() const { return realtime.size() + reprocessing.size(); }
  void Push(QueuedJob q);
  QueuedJob Pop();
  static bool HasFor(const std::deque<QueuedJob>& q, int device);
  bool HasFor(int device) const { return HasFor(realtime, device) || HasFor(reprocessing, device); }
  // Requires HasFor(device) (or HasFor(realtime, device) with `realtime_only`).
  QueuedJob PopFor(int device, bool realtime_only = false);
  // As PopFor(device), preferring among the jobs of the first runnable one's level due
  // within kWarmReorderSlack of it: one whose geometry is in `warm_here`, else one warm
  // on no other worker (`warm_elsewhere`), else the first. Requires HasFor(device).
  QueuedJob PopWarmFor(int device, const std::set<const core::Geometry*>& warm_here,
                       const std::set<const core::Geometry*>& warm_elsewhere);
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_STATE_JOB_LEVELS_H_
