// spexctl runs once per frame: every page its heap touches is a fresh process's first
// touch, one page fault per 4 KiB (the stream's receive buffers and the arrays parsed out
// of them: ~14,000 faults and about a quarter of spexctl's CPU for a client-written r
// frame, sampled with perf). glibc's malloc asks for transparent huge pages when its
// tunable glibc.malloc.hugetlb=1 is set, one fault per 2 MiB where the kernel grants them
// (THP "madvise" or "always"); tunables are read only from the environment at start, so a
// remote extract that writes the frame itself starts once more with it set.
#ifndef SPEXD_CLIENT_SPEXCTL_HUGE_PAGE_MALLOC_H_
#define SPEXD_CLIENT_SPEXCTL_HUGE_PAGE_MALLOC_H_

#include <optional>
#include <string>

namespace spexd::client {

// GLIBC_TUNABLES with glibc.malloc.hugetlb=1 added to `current` (null: unset), or nullopt
// when `current` sets malloc's hugetlb already (whatever its value: the user's choice).
std::optional<std::string> TunablesWithHugePages(const char* current);

// Executes this program again (its path from /proc/self/exe, the same arguments) with
// those tunables, before it connects; returns when there is nothing to do or the exec
// failed (the process then runs as it is, correctly, with 4 KiB pages). glibc only.
void RestartWithHugePageMalloc(char** argv);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_SPEXCTL_HUGE_PAGE_MALLOC_H_
