#include "server/state/job_levels.h"

#include <algorithm>
#include <utility>

namespace spexd::server {

QueuedJob JobLevels::Pop() {
  auto& q = realtime.empty() ? reprocessing : realtime;
  QueuedJob item = std::move(q.front());
  q.pop_front();
  return item;
}

void JobLevels::Push(QueuedJob q) {
  std::deque<QueuedJob>& level = q.realtime ? realtime : reprocessing;
  // After every job due no later than this one: EDF, FIFO among equal deadlines (jobs
  // left without one, a zero horizon, have max() and simply append).
  auto at = std::upper_bound(level.begin(), level.end(), q.due,
                             [](const auto& due, const QueuedJob& other) { return due < other.due; });
  level.insert(at, std::move(q));
}

bool JobLevels::HasFor(const std::deque<QueuedJob>& q, int device) {
  for (const QueuedJob& item : q) {
    if (item.device < 0 || item.device == device) return true;
  }
  return false;
}

QueuedJob JobLevels::PopFor(int device, bool realtime_only) {
  for (std::deque<QueuedJob>* q : {&realtime, &reprocessing}) {
    if (realtime_only && q != &realtime) break;
    for (auto it = q->begin(); it != q->end(); ++it) {
      if (it->device < 0 || it->device == device) {
        QueuedJob item = std::move(*it);
        q->erase(it);
        return item;
      }
    }
  }
  return QueuedJob{};
}

QueuedJob JobLevels::PopWarmFor(
    int device, const std::set<const core::Geometry*>& warm_here,
    const std::set<const core::Geometry*>& warm_elsewhere) {
  std::deque<QueuedJob>& q = HasFor(realtime, device) ? realtime : reprocessing;
  auto runnable = [device](const QueuedJob& item) { return item.device < 0 || item.device == device; };
  const auto first = std::find_if(q.begin(), q.end(), runnable);
  // The level is EDF-ordered: the candidates are a prefix from `first` on.
  const auto latest = first->due >= std::chrono::steady_clock::time_point::max() - kWarmReorderSlack
                          ? std::chrono::steady_clock::time_point::max()
                          : first->due + kWarmReorderSlack;
  auto cold = q.end();  // the first candidate warm on no other worker
  auto chosen = q.end();
  for (auto it = first; it != q.end() && it->due <= latest; ++it) {
    if (!runnable(*it)) continue;
    const core::Geometry* g = it->job->warm_geometry();
    if (g != nullptr && warm_here.count(g) > 0) {
      chosen = it;
      break;
    }
    if (cold == q.end() && (g == nullptr || warm_elsewhere.count(g) == 0)) cold = it;
  }
  if (chosen == q.end()) chosen = cold != q.end() ? cold : first;
  QueuedJob item = std::move(*chosen);
  q.erase(chosen);
  return item;
}

}  // namespace spexd::server
