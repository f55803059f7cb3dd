// Faulting fresh host memory in ahead of a copy, from several threads at once. A vector of
// a few MB is a fresh mapping whose pages the kernel zeroes one fault at a time on first
// touch (~2.5 ms for a bundle's 6 MB of Rdiags): done from one thread inside the copy, that
// is most of the time a bundle takes to leave pinned output buffers.
#ifndef SPEXD_CORE_PREFAULT_H_
#define SPEXD_CORE_PREFAULT_H_

#include <cstddef>

namespace spexd::core {

// Makes the whole pages inside [data, data + bytes) present and writable without changing
// their contents (madvise MADV_POPULATE_WRITE, Linux 5.14+). Advice only: a kernel without
// it leaves the pages to fault on first touch.
void PrefaultForWrite(void* data, std::size_t bytes);

// Asks for transparent huge pages on the whole 2 MiB pages inside [data, data + bytes)
// (madvise MADV_HUGEPAGE), for memory not yet touched: under THP "madvise" mode its first
// touch then faults 2 MiB at a time, and reads across it walk 512x fewer pages (a CPU
// frame's stamps). Advice only: refused or ignored, the memory keeps 4 KiB pages.
void AdviseHugePages(void* data, std::size_t bytes);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PREFAULT_H_
