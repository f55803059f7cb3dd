#include "core/base/allocator_settings.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spexd::core {

void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  // Advice only: a glibc that refuses a value keeps its default, which is correct too.
  (void)mallopt(M_MMAP_THRESHOLD, 32 << 20);
  (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace spexd::core
