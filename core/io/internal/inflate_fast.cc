#include "core/io/internal/inflate_fast.h"

#include <atomic>
#include <cstring>

#include "core/io/internal/inflate_huffman.h"
#include "core/io/internal/inflate_tables.h"

// Everything the loop calls is forced inline, so that the BMI2 build below compiles all of
// it with BMI2 (and no out-of-line copy built with BMI2 is ever shared with the plain one).
#define SPEXD_FAST_INLINE inline __attribute__((always_inline))

namespace spexd::core::internal {
namespace {

SPEXD_FAST_INLINE uint64_t Load64(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Bits [0, n) of x, n < 64 the low byte of `n` (a table entry's bits to drop: the entry as
// it is). BMI2's bzhi reads just that byte, in one uop; the compiler does not pick it for
// the mask on its own (it builds ~(-1 << n) and an and), hence the asm.
template <bool kBmi2>
SPEXD_FAST_INLINE uint64_t LowBits(uint64_t x, uint32_t n) {
#if defined(__x86_64__)
  if constexpr (kBmi2) {
    uint64_t r;
    asm("bzhi %2, %1, %0" : "=r"(r) : "r"(x), "r"(uint64_t{n}));
    return r;
  }
#endif
  return x & ((uint64_t{1} << (n & 0xFF)) - 1);
}

template <typename Sym>
SPEXD_FAST_INLINE Sym Literal(uint32_t e) {
  return static_cast<Sym>((e >> 16) & 0xFF);
}

// Copies the match (len, back) to `to`, back <= the symbols before `to`, in moves of 16 or 8
// bytes that may run up to 32 bytes past the match (the caller has that room; the next
// symbols overwrite them). A move never reads what it writes, only what earlier moves
// wrote, as the match's symbol-by-symbol definition (RFC 1951 §3.2.3) does.
template <typename Sym>
SPEXD_FAST_INLINE void CopyMatch(Sym* to, std::size_t len, std::size_t back) {
  constexpr std::size_t k8 = 8 / sizeof(Sym), k16 = 16 / sizeof(Sym);
  const Sym* from = to - back;
  Sym* const end = to + len;
  if (__builtin_expect(back >= k16, 1)) {
    // Two moves unconditionally: most matches are short, and a loop's exit mispredicts.
    std::memcpy(to, from, 16);
    std::memcpy(to + k16, from + k16, 16);
    if (len > 2 * k16) {
      to += 2 * k16;
      from += 2 * k16;
      do {
        std::memcpy(to, from, 16);
        std::memcpy(to + k16, from + k16, 16);
        to += 2 * k16;
        from += 2 * k16;
      } while (to < end);
    }
  } else if (back >= k8) {
    do {
      std::memcpy(to, from, 8);
      std::memcpy(to + k8, from + k8, 8);
      to += 2 * k8;
      from += 2 * k8;
    } while (to < end);
  } else if (back == 1) {
    const uint64_t v = uint64_t{*from} * (sizeof(Sym) == 1 ? 0x0101010101010101u : 0x0001000100010001u);
    do {
      std::memcpy(to, &v, 8);
      std::memcpy(to + k8, &v, 8);
      to += 2 * k8;
    } while (to < end);
  } else {
    for (std::size_t i = 0; i < len; ++i) to[i] = from[i];
  }
}

// One stream's state while a loop runs: locals (stores through a symbol pointer could
// alias a struct's fields in memory, which the compiler would then reload; this one is
// scalarised, its address never escaping the inlined steps). Each step starts with >= 56
// bits in `buf` and the next literal/length entry `e` looked up, not yet dropped; the bit
// count is kept in the low byte of `count` only, so that a whole entry (whose low byte is
// the bits it drops) can be subtracted, and `buf` is shifted by the entry itself (x86
// takes a shift count mod 64).
template <typename Sym>
struct Lane {
  const uint8_t* in;
  uint64_t buf;
  uint32_t count;
  uint32_t e;
  Sym* out;
  std::size_t marker_end;
  Sym* base;
  const uint32_t* lit;
  const uint32_t* dist;
  const uint8_t* in_last;  // the step may start while in <= in_last and out <= out_last
  Sym* out_last;
};

// Leaves 56-63 bits: loads 8 bytes, keeps the whole ones that fitted. The bits above the
// count are the next bytes' own, so OR-ing them in again changes nothing; the low bits
// an entry was looked up with stay as they were.
template <typename Sym>
SPEXD_FAST_INLINE void Refill(Lane<Sym>& l) {
  l.buf |= Load64(l.in) << (l.count & 63);
  l.in += (~l.count & 63) >> 3;
  l.count |= 56;
}

template <typename Sym>
SPEXD_FAST_INLINE void Drop(Lane<Sym>& l, uint32_t e) {
  l.buf >>= (e & 63);
  l.count -= e;
}

template <typename Sym>
SPEXD_FAST_INLINE Lane<Sym> EnterLane(const FastLoopState<Sym>& s) {
  Lane<Sym> l{s.in, s.buf, s.count, 0, s.out, s.marker_end, s.base, s.lit, s.dist,
              s.in_end - kFastInRoom, s.out_end - kFastOutRoom};
  Refill(l);
  l.e = l.lit[l.buf & ((1u << kLitBits) - 1)];
  return l;
}

template <typename Sym>
SPEXD_FAST_INLINE void LeaveLane(const Lane<Sym>& l, FastLoopState<Sym>& s) {
  s.in = l.in;
  s.buf = l.buf;
  s.count = l.count & 0xFF;
  s.out = l.out;
  s.marker_end = l.marker_end;
}

template <typename Sym>
SPEXD_FAST_INLINE bool HasRoom(const Lane<Sym>& l) {
  return l.out <= l.out_last && l.in <= l.in_last;
}

template <typename Sym>
bool StateHasRoom(const FastLoopState<Sym>& s) {
  return s.in_end - s.in >= static_cast<std::ptrdiff_t>(kFastInRoom) &&
         s.out_end - s.out >= static_cast<std::ptrdiff_t>(kFastOutRoom);
}

// One step: up to three literals, or a literal from a subtable, or one match. kRoom means
// "go on" here; kEnd and kError end the loop.
template <typename Sym, bool kBmi2>
SPEXD_FAST_INLINE FastLoopExit Step(Lane<Sym>& l) {
  constexpr uint32_t kLitMask = (1u << kLitBits) - 1, kDistMask = (1u << kDistBits) - 1;
  uint32_t e = l.e;
  if (static_cast<int32_t>(e) < 0) {
    // Literals from the primary table take <= 11 bits: three, and the next lookup, fit.
    Drop(l, e);
    *l.out++ = Literal<Sym>(e);
    e = l.lit[l.buf & kLitMask];
    if (static_cast<int32_t>(e) < 0) {
      Drop(l, e);
      *l.out++ = Literal<Sym>(e);
      e = l.lit[l.buf & kLitMask];
      if (static_cast<int32_t>(e) < 0) {
        Drop(l, e);
        *l.out++ = Literal<Sym>(e);
        l.e = l.lit[l.buf & kLitMask];
        Refill(l);
        return FastLoopExit::kRoom;
      }
    }
    Refill(l);
  }
  // >= 56 bits from here: a length (a subtable's code: 15 bits, and 5 extra bits) and a
  // distance (15 and 13).
  if (e & kSubFlag) {
    Drop(l, e);
    e = l.lit[(e >> 16) + LowBits<kBmi2>(l.buf, (e >> 8) & 15)];
    if (static_cast<int32_t>(e) < 0) {
      Drop(l, e);
      *l.out++ = Literal<Sym>(e);
      l.e = l.lit[l.buf & kLitMask];
      Refill(l);
      return FastLoopExit::kRoom;
    }
  }
  if (__builtin_expect(!(e & kMatchFlag), 0)) {
    if (e & kEndFlag) {
      Drop(l, e);
      return FastLoopExit::kEnd;
    }
    return FastLoopExit::kError;
  }
  // A length or distance: its extra bits from the buffer as it was before the drop, past
  // the code (a match entry's bits 8-13 are its code length).
  uint64_t saved = l.buf;
  Drop(l, e);
  const std::size_t len = (e >> 16) + (LowBits<kBmi2>(saved, e) >> ((e >> 8) & 63));
  uint32_t d = l.dist[l.buf & kDistMask];
  if (__builtin_expect(d & kSubFlag, 0)) {
    Drop(l, d);
    d = l.dist[(d >> 16) + LowBits<kBmi2>(l.buf, (d >> 8) & 15)];
  }
  if (__builtin_expect(!(d & kMatchFlag), 0)) return FastLoopExit::kError;
  saved = l.buf;
  Drop(l, d);
  const std::size_t back = (d >> 16) + (LowBits<kBmi2>(saved, d) >> ((d >> 8) & 63));
  // The next entry looked up before the copy, so that its load overlaps the copy.
  Refill(l);
  l.e = l.lit[l.buf & kLitMask];
  const std::size_t pos = static_cast<std::size_t>(l.out - l.base);
  if (__builtin_expect(back > pos, 0)) {
    if (!CopyFromWindow(l.base, pos, len, back, &l.marker_end)) return FastLoopExit::kError;
  } else {
    CopyMatch(l.out, len, back);
    if (sizeof(Sym) > 1 && pos - back < l.marker_end) FindMarkers(l.base, pos, len, &l.marker_end);
  }
  l.out += len;
  return FastLoopExit::kRoom;
}

// The loop: steps while the room lasts. An error leaves the state where it was found
// (the caller reports the stream bad either way).
template <typename Sym, bool kBmi2>
SPEXD_FAST_INLINE FastLoopExit FastLoop(FastLoopState<Sym>& s) {
  if (!StateHasRoom(s)) return FastLoopExit::kRoom;
  Lane<Sym> l = EnterLane(s);
  FastLoopExit exit;
  do {
    exit = Step<Sym, kBmi2>(l);
    if (__builtin_expect(exit != FastLoopExit::kRoom, 0)) break;
  } while (__builtin_expect(HasRoom(l), 1));
  LeaveLane(l, s);
  return exit;
}

// Two streams stepped in turn: each step's table lookups wait on the previous one's
// shift (a literal's chain of load, shift and load is most of the loop's time), and the
// other stream's step fills that wait. Stops when either stream ends its block, errs, or
// runs out of room; the other is left between two steps.
template <bool kBmi2>
SPEXD_FAST_INLINE void FastLoopPair(FastLoopState<uint8_t>& a, FastLoopState<uint8_t>& b,
                                    FastLoopExit exits[2]) {
  exits[0] = exits[1] = FastLoopExit::kRoom;
  if (!StateHasRoom(a) || !StateHasRoom(b)) return;
  Lane<uint8_t> la = EnterLane(a), lb = EnterLane(b);
  do {
    exits[0] = Step<uint8_t, kBmi2>(la);
    if (__builtin_expect(exits[0] != FastLoopExit::kRoom, 0)) break;
    exits[1] = Step<uint8_t, kBmi2>(lb);
    if (__builtin_expect(exits[1] != FastLoopExit::kRoom, 0)) break;
  } while (__builtin_expect(HasRoom(la) && HasRoom(lb), 1));
  LeaveLane(la, a);
  LeaveLane(lb, b);
}

template <typename Sym>
FastLoopExit PlainLoop(FastLoopState<Sym>& s) {
  return FastLoop<Sym, false>(s);
}

void PlainPair(FastLoopState<uint8_t>& a, FastLoopState<uint8_t>& b, FastLoopExit exits[2]) {
  FastLoopPair<false>(a, b, exits);
}

#if defined(__x86_64__)
template <typename Sym>
__attribute__((target("bmi2"))) FastLoopExit Bmi2Loop(FastLoopState<Sym>& s) {
  return FastLoop<Sym, true>(s);
}

__attribute__((target("bmi2"))) void Bmi2Pair(FastLoopState<uint8_t>& a, FastLoopState<uint8_t>& b,
                                               FastLoopExit exits[2]) {
  FastLoopPair<true>(a, b, exits);
}

bool CpuHasBmi2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("bmi2") != 0;
  }();
  return has;
}
#else
bool CpuHasBmi2() { return false; }
#endif

std::atomic<int> g_bmi2{-1};  // -1: not chosen yet (the CPU decides), 0 or 1

bool Bmi2() {
  int v = g_bmi2.load(std::memory_order_relaxed);
  if (v < 0) {
    v = CpuHasBmi2() ? 1 : 0;
    g_bmi2.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

}  // namespace

template <typename Sym>
FastLoopExit RunFastLoop(FastLoopState<Sym>& s) {
#if defined(__x86_64__)
  if (Bmi2()) return Bmi2Loop(s);
#endif
  return PlainLoop(s);
}

void RunFastLoopPair(FastLoopState<uint8_t>& a, FastLoopState<uint8_t>& b, FastLoopExit exits[2]) {
#if defined(__x86_64__)
  if (Bmi2()) return Bmi2Pair(a, b, exits);
#endif
  PlainPair(a, b, exits);
}

bool UseBmi2FastLoop(bool on) {
  const bool can = on && CpuHasBmi2();
  g_bmi2.store(can ? 1 : 0, std::memory_order_relaxed);
  return can;
}

bool Bmi2FastLoopInUse() { return Bmi2(); }

template FastLoopExit RunFastLoop(FastLoopState<uint8_t>&);
template FastLoopExit RunFastLoop(FastLoopState<uint16_t>&);

}  // namespace spexd::core::internal
