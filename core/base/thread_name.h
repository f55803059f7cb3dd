// Names the calling thread for `top -H`, perf and /proc/<pid>/task/*/comm, so that an
// operator (and scripts/spexctl_throughput_device.sh) can see which of spexd's roles
// holds the cores: host pool, loaders, workers, streamers.
#ifndef SPEXD_CORE_BASE_THREAD_NAME_H_
#define SPEXD_CORE_BASE_THREAD_NAME_H_

#include "absl/strings/string_view.h"

namespace spexd::core {

// Linux keeps 15 bytes of a thread's name; longer names are cut. A no-op elsewhere.
void NameThisThread(absl::string_view name);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_THREAD_NAME_H_
