// Two deflate streams decoded into bytes by one thread, their fast loops interleaved
// (RunFastLoopPair, inflate_fast.h): a literal's table lookup waits on the shift by the
// previous one's code length, and the other stream's step fills that wait. The parallel
// inflation (parallel_inflate.cc) gives each thread two chunks this way on a busy host,
// where CPU per byte, not one chunk's latency, limits the frames served.
#ifndef SPEXD_CORE_IO_INTERNAL_INFLATE_PAIR_H_
#define SPEXD_CORE_IO_INTERNAL_INFLATE_PAIR_H_

#include <atomic>
#include <cstdint>

#include "core/io/internal/inflate_huffman.h"

namespace spexd::core::internal {

// Whole blocks decoded into `out` (history: out.data[0, out.pos)) from the reader's
// position, which is a block's start, until a final block ends or a block ends at or
// after stop_bit; with member_end set, the run also stops (kNoRoom) after a block once
// begin_bit > *member_end (a chunk found past the member's end: parallel_inflate.cc).
// The same blocks, bytes and statuses as decoding it alone.
struct ByteRun {
  BitReader* in;
  BlockDecoder* dec;
  InflateOutput<uint8_t>* out;
  uint64_t stop_bit;
  const std::atomic<uint64_t>* member_end = nullptr;
  uint64_t begin_bit = 0;
  // Results.
  bool final = false;
  InflateStatus status = InflateStatus::kOk;
  // Progress, for DecodeBytesPair.
  bool in_block = false, done = false;
};

// Decodes both runs to their ends (see ByteRun).
void DecodeBytesPair(ByteRun& a, ByteRun& b);
// One run alone, to its end.
void DecodeBytesAlone(ByteRun& r);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_IO_INTERNAL_INFLATE_PAIR_H_
