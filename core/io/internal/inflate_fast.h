// The deflate decoder's fast loop (BlockDecoder::DecodeBody, inflate_huffman.h): the bulk
// of a Huffman block, while the input has 16 bytes and the output room for any symbol,
// so that no step checks a bound. Built twice on x86-64: plain, and with BMI2 (shifts by
// a register in one uop: three on Intel cores without it), picked at run time.
#ifndef SPEXD_CORE_IO_INTERNAL_INFLATE_FAST_H_
#define SPEXD_CORE_IO_INTERNAL_INFLATE_FAST_H_

#include <cstddef>
#include <cstdint>

namespace spexd::core::internal {

// Output room the loop needs per step: two literals, then a whole match (RFC 1951
// §3.2.5: 258) and the overrun of its 16-byte moves.
constexpr std::size_t kFastOutRoom = 258 + 2 + 32;
// Input room: the loop runs while in + 16 <= in_end (one 8-byte refill per step).
constexpr std::size_t kFastInRoom = 16;

// The reader's and the output's state, copied into locals by the loop and back on exit.
template <typename Sym>
struct FastLoopState {
  const uint8_t* in;      // the next byte to load
  const uint8_t* in_end;  // the end of the input
  uint64_t buf;           // bits not yet consumed, LSB first (RFC 1951 §3.1.1)
  unsigned count;         // how many of them are valid (0-63)
  Sym* base;              // the output's start: the history for back-references
  Sym* out;               // where the next symbol goes
  Sym* out_end;           // the end of the output's room
  std::size_t marker_end;  // 16-bit output: no window markers from here on
  const uint32_t* lit;     // the block's tables (inflate_tables.h)
  const uint32_t* dist;
};

enum class FastLoopExit {
  kRoom,   // near the end of the input or of the output's room: the checked loop goes on
  kEnd,    // the block's end-of-block code was consumed
  kError,  // an invalid code, or a distance before the history (RFC 1951 §3.2.5)
};

// Decodes while the room lasts (kRoom at once, having read nothing, when there is none).
template <typename Sym>
FastLoopExit RunFastLoop(FastLoopState<Sym>& s);

// Two independent byte streams (their own input, output and tables) in one loop, a step of
// each in turn, so that the core overlaps their dependent table lookups. Runs while both
// have room; stops when either ends its block (kEnd), meets an error (kError) or runs out
// of room. exits[i] is stream i's; a stream stopped between two steps (its partner ended
// the run, or its own room ran out) reports kRoom, its state consistent for any next call.
void RunFastLoopPair(FastLoopState<uint8_t>& a, FastLoopState<uint8_t>& b, FastLoopExit exits[2]);

// Which build of the loop RunFastLoop uses: BMI2 where the CPU has it (the default).
// Tests switch to compare both with libdeflate; false when the CPU lacks BMI2.
bool UseBmi2FastLoop(bool on);
bool Bmi2FastLoopInUse();

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_IO_INTERNAL_INFLATE_FAST_H_
