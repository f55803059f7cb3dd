// CPU extraction backend: patches of a bundle in parallel on a core::TaskPool; results are
// bit-identical for any thread count (each patch is computed independently and written
// to its own output slots; model windows are summed in patch order).
#ifndef SPEXD_CORE_CPU_BACKEND_H_
#define SPEXD_CORE_CPU_BACKEND_H_

#include <memory>

#include "absl/status/status.h"

#include "core/backend/backend.h"
#include "core/base/task_pool.h"

namespace spexd::core {

// Solves `threads` patches at once (<= 0: one per hardware thread): on the extracting
// thread and on up to threads - 1 threads of `pool`, which is not owned and must outlive
// the backend. Without a pool the backend starts its own, of threads - 1 threads, joined
// when it is destroyed.
std::unique_ptr<Backend> CreateCpuBackend(int threads, TaskPool* pool = nullptr);

}  // namespace spexd::core

#endif  // SPEXD_CORE_CPU_BACKEND_H_
