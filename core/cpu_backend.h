// CPU extraction backend: patches of a bundle in parallel on all cores; results are
// bit-identical for any thread count (each patch is computed independently and written
// to its own output slots; model windows are summed in patch order).
#ifndef SPEXD_CORE_CPU_BACKEND_H_
#define SPEXD_CORE_CPU_BACKEND_H_

#include <memory>

#include "core/backend.h"

namespace spexd::core {

std::unique_ptr<Backend> CreateCpuBackend(int threads);

}  // namespace spexd::core

#endif  // SPEXD_CORE_CPU_BACKEND_H_
