// The unit of work the scheduler hands to its loaders and workers.
#ifndef SPEXD_SERVER_STATE_JOB_H_
#define SPEXD_SERVER_STATE_JOB_H_

#include <chrono>

#include "absl/status/status.h"
#include "core/backend/backend.h"
#include "core/base/task_pool.h"

namespace spexd::server {

// Work handed to a worker. Prepare is called first (on a loader thread); if it returns
// true, Run follows; Abandon replaces whichever has not happened when the scheduler
// shuts down. A job that returns false from Prepare has finished itself.
class Job {
 public:
  virtual ~Job() = default;
  virtual bool Prepare() { return true; }
  // The GPU this job must run on (its input or output is a CUDA region there), or -1 for
  // any worker. Fixed from Submit on.
  virtual int device() const { return -1; }
  // The job's absolute deadline (steady clock), max() when none: within a priority level
  // the scheduler takes jobs earliest deadline first, FIFO among equal deadlines; a job
  // without one is ordered as if due a horizon after its Submit (OrderingDeadline). Fixed
  // from Submit on.
  virtual std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::time_point::max();
  }
  // The geometry the job extracts with, once Prepare has returned true (null: none, or
  // not known). A worker whose backend holds it warm (Backend::Memory's geometry_bytes)
  // is preferred for the job: an exposure's 30 PSFs each warm on one GPU worker instead
  // of every frame rebuilding its spots on whichever worker is free.
  virtual const core::Geometry* warm_geometry() const { return nullptr; }
  // On the worker's thread; `backend` belongs to that worker for the whole call.
  // `streaming` is the scheduler's streaming stage: work posted there may go on after Run
  // returns (sending the results), and Shutdown waits for it.
  virtual void Run(core::Backend& backend, int worker, core::TaskPool& streaming) = 0;
  // The job will never run (the scheduler shut down while it waited).
  virtual void Abandon(const absl::Status& status) = 0;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_STATE_JOB_H_
