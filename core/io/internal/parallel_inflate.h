// Inflating one large gzip member (RFC 1952) on several cores. A member is one deflate
// stream (RFC 1951) with no index, so it is split speculatively: chunk k > 0 starts at the
// first bit offset after its nominal start where a plausible block header lies, and is
// decoded without the 32 KiB window before it (back-references into it become markers,
// resolved once the previous chunk is known). The chunks are then chained: chunk k is
// used only when the previous one, decoded from a proven start, stopped at exactly the
// block boundary where chunk k began; the stretches between chunks that do not chain are
// decoded sequentially. Deflate decoding from a true block boundary with the right window
// is deterministic, so the guesses decide only the speed, never the bytes.
#ifndef SPEXD_CORE_IO_INTERNAL_PARALLEL_INFLATE_H_
#define SPEXD_CORE_IO_INTERNAL_PARALLEL_INFLATE_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "core/base/task_pool.h"
#include "core/io/plane_buffer.h"

namespace spexd::core::internal {

// What the last call did, for tests and benchmarks.
struct ParallelInflateStats {
  int chunks = 0;                  // the member was split into this many
  int chunks_used = 0;             // chunks k > 0 that chained (decoded in parallel)
  std::size_t sequential_bytes = 0;  // output decoded one thread after the parallel phase
  // Wall seconds of the phases: chunks decoded, chained, resolved and copied, CRC-32.
  double decode_s = 0, chain_s = 0, write_s = 0, crc_s = 0;
};

// true unless the environment sets SPEXD_INFLATE_PAIRS=0 (an A/B switch for benchmarks).
bool PairChunksByDefault();

struct ParallelInflateOptions {
  TaskPool* pool = nullptr;  // the decode pool (ParallelFor); null: one thread
  int max_threads = 1;       // threads decoding at once, the caller included
  // Two chunks a thread, their byte stretches interleaved (inflate_pair.h): about 0.7 of
  // the CPU per byte of one chunk a thread, each chunk half as long. false: one a thread.
  bool pair_chunks = PairChunksByDefault();
  // Compressed bytes per chunk at least: a chunk costs a block search and its window
  // resolution, worth it only when it holds many blocks.
  std::size_t min_chunk_bytes = std::size_t{4} << 20;
  // Where the chunks' outputs are kept until placed (about the member's output size in
  // all); null: memory of their own.
  PlaneBufferPool* buffers = nullptr;
  ParallelInflateStats* stats = nullptr;  // filled when set
};

// The number of chunks the member at the start of `in` would be split into: 1 or less
// means that ParallelInflate is not worth calling.
int ParallelInflateChunks(std::size_t in_size, const ParallelInflateOptions& options);

// Inflates the gzip member at the start of `in` (more members or padding may follow) into
// out[0, capacity). True, with the member's compressed size in *in_used and its output
// size in *out_used, when the whole member decoded and its CRC-32 and ISIZE trailer match
// (RFC 1952 §2.3.1). False for anything else: corrupt, truncated, over capacity or
// unsupported (the caller then inflates the member with libdeflate, whose result or error
// stands). Nothing is written past out[capacity - 1].
bool ParallelInflate(absl::string_view in, char* out, std::size_t capacity,
                     const ParallelInflateOptions& options, std::size_t* in_used,
                     std::size_t* out_used);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_IO_INTERNAL_PARALLEL_INFLATE_H_
