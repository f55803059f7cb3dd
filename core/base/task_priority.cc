#include "core/base/task_priority.h"

namespace spexd::core {
namespace {

thread_local bool t_has_key = false;
thread_local int64_t t_key = 0;

}  // namespace

int64_t TaskPriorityOf(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int64_t CurrentTaskPriority() {
  return t_has_key ? t_key : TaskPriorityOf(std::chrono::steady_clock::now());
}

TaskPriorityScope::TaskPriorityScope(int64_t key) : had_(t_has_key), outer_(t_key) {
  t_has_key = true;
  t_key = key;
}

TaskPriorityScope::TaskPriorityScope(std::chrono::steady_clock::time_point arrived)
    : TaskPriorityScope(TaskPriorityOf(arrived)) {}

TaskPriorityScope::~TaskPriorityScope() {
  t_has_key = had_;
  t_key = outer_;
}

}  // namespace spexd::core
