// glibc malloc settings for a process whose many threads allocate and free frame-sized
// buffers (megabytes to tens of megabytes) over and over.
#ifndef SPEXD_CORE_BASE_ALLOCATOR_SETTINGS_H_
#define SPEXD_CORE_BASE_ALLOCATOR_SETTINGS_H_

namespace spexd::core {

// Keeps freed memory in the process for reuse: blocks under 32 MiB (glibc's largest mmap
// threshold) come from the arenas, and an arena's free top is given back to the kernel
// only above 1 GiB. By default glibc returns it (madvise MADV_DONTNEED) as soon as
// 128 KiB are free, a TLB shootdown on every core the process runs on each time, and
// maps blocks it has just unmapped afresh, a page fault per 4 KiB: on a 64-core host
// serving four GPUs that cost 4 % of the host's samples. Call first thing in main, before any
// thread starts. glibc only; elsewhere nothing.
void KeepFreedMemoryForReuse();

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_ALLOCATOR_SETTINGS_H_
