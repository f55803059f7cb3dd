#include "core/base/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 (older libc headers lack the name)
#endif

namespace spexd::core {

namespace {

// madvise(advice) on the whole `unit`-aligned pieces of [data, data + bytes), if any.
void AdviseWhole(void* data, std::size_t bytes, uintptr_t unit, int advice) {
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + unit - 1) / unit * unit;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / unit * unit;
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

}  // namespace

void PrefaultForWrite(void* data, std::size_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  AdviseWhole(data, bytes, page, MADV_POPULATE_WRITE);
}

void AdviseHugePages(void* data, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  AdviseWhole(data, bytes, uintptr_t{2} << 20, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace spexd::core
