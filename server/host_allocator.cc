#include "server/host_allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spexd::server {

bool TuneHostAllocator() {
#if defined(__GLIBC__)
  // M_MMAP_THRESHOLD set explicitly also ends glibc's dynamic threshold, which would
  // otherwise set the trim threshold back to twice the largest block freed.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kArenaBlockBytes)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(kArenaKeepBytes)) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

}  // namespace spexd::server
