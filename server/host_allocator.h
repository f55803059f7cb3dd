// glibc malloc settings for a server process that allocates and frees a frame's worth of
// bundle arrays (tens of MB, in pieces of up to a few MB) per frame on many threads at
// once. By default glibc hands such blocks back to the kernel on free (munmap, or trimming
// a thread arena's top with MADV_DONTNEED) and takes fresh zeroed pages on the next
// allocation: every frame then page-faults its outputs in again, and on a host with
// several GPUs those faults contend in the kernel (zeroing, memory-cgroup charge, TLB
// shootdowns to every core the process runs on). Measured on 4 x H200 (64 vCPUs): the
// CUDA backend's bundle allocation took 0.1 s a frame against 0.05 s of GPU work, which
// held four GPUs to about half their pace. Keeping freed blocks in the arenas makes the
// next frame reuse resident memory.
#ifndef SPEXD_SERVER_HOST_ALLOCATOR_H_
#define SPEXD_SERVER_HOST_ALLOCATOR_H_

#include <cstddef>

namespace spexd::server {

// Blocks up to this size come from malloc's arenas rather than their own mappings: the
// largest a thread arena can hold (half of glibc's 64 MiB heap on 64-bit hosts).
inline constexpr std::size_t kArenaBlockBytes = std::size_t{32} << 20;
// Free memory an arena keeps at its top before it gives pages back: the frames a server
// holds at once are bounded (Scheduler::PrefetchBound, streaming threads), so what the
// arenas retain is bounded by that peak.
inline constexpr std::size_t kArenaKeepBytes = std::size_t{1} << 30;

// Applies both settings to this process (mallopt); false when the C library refused one
// (not glibc, or a glibc without these parameters): the defaults then stay.
bool TuneHostAllocator();

}  // namespace spexd::server

#endif  // SPEXD_SERVER_HOST_ALLOCATOR_H_
