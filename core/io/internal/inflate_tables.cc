#include "core/io/internal/inflate_tables.h"

#include <algorithm>
#include <array>
#include <cstddef>

namespace spexd::core::internal {
namespace {

constexpr std::size_t kMaxLitSymbols = 288, kMaxDistSymbols = 32;

// RFC 1951 §3.2.5: length codes 257..285 and distance codes 0..29, as (base, extra bits).
struct BaseTables {
  std::array<uint16_t, 29> len_base{};
  std::array<uint8_t, 29> len_extra{};
  std::array<uint16_t, 30> dist_base{};
  std::array<uint8_t, 30> dist_extra{};
  BaseTables() {
    uint32_t base = 3;
    for (int i = 0; i < 28; ++i) {
      len_extra[i] = static_cast<uint8_t>(i < 8 ? 0 : (i - 4) / 4);
      len_base[i] = static_cast<uint16_t>(base);
      base += 1u << len_extra[i];
    }
    len_base[28] = 258;  // code 285: 258 with no extra bits, not the next in the series
    len_extra[28] = 0;
    base = 1;
    for (int i = 0; i < 30; ++i) {
      dist_extra[i] = static_cast<uint8_t>(i < 4 ? 0 : i / 2 - 1);
      dist_base[i] = static_cast<uint16_t>(base);
      base += 1u << dist_extra[i];
    }
  }
};
const BaseTables& Bases() {
  static const BaseTables t;
  return t;
}

// The entry of symbol `sym` whose code is `len` bits long (`len` in its table: for a
// subtable, the bits after the primary index).
uint32_t SymbolEntry(Alphabet alphabet, unsigned sym, unsigned len) {
  uint32_t head = 0;  // flags and value
  unsigned extra = 0;
  if (alphabet == Alphabet::kCodeLength) {
    head = kLitFlag | (sym << 16);
  } else if (alphabet == Alphabet::kDistance) {
    if (sym < 30) {
      head = kMatchFlag | (uint32_t{Bases().dist_base[sym]} << 16);
      extra = Bases().dist_extra[sym];
    }
  } else if (sym < 256) {
    head = kLitFlag | (sym << 16);
  } else if (sym == 256) {
    head = kEndFlag;
  } else if (sym <= 285) {
    head = kMatchFlag | (uint32_t{Bases().len_base[sym - 257]} << 16);
    extra = Bases().len_extra[sym - 257];
  }  // else 286, 287: part of the fixed code, never valid (no flag)
  return head | (len << 8) | (len + extra);
}

// Bit reversal of bytes, for the reversed codes.
constexpr std::array<uint8_t, 256> kReversedBytes = [] {
  std::array<uint8_t, 256> r{};
  for (unsigned b = 0; b < 256; ++b) {
    unsigned v = 0;
    for (unsigned i = 0; i < 8; ++i) v |= ((b >> i) & 1u) << (7 - i);
    r[b] = static_cast<uint8_t>(v);
  }
  return r;
}();
// The low `bits` (<= 16) bits of `code`, reversed.
inline uint32_t Reverse(uint32_t code, unsigned bits) {
  const uint32_t r16 = (uint32_t{kReversedBytes[code & 0xFF]} << 8) | kReversedBytes[(code >> 8) & 0xFF];
  return r16 >> (16 - bits);
}

}  // namespace

bool BuildTable(const uint8_t* lens, unsigned n, Alphabet alphabet, std::vector<uint32_t>* table) {
  const unsigned primary_bits = alphabet == Alphabet::kLitLen     ? kLitBits
                                : alphabet == Alphabet::kDistance ? kDistBits
                                                                  : kCodeLenBits;
  unsigned count[16] = {};
  for (unsigned s = 0; s < n; ++s) ++count[lens[s]];
  count[0] = 0;
  int left = 1;
  unsigned max_len = 0, used = 0;
  for (unsigned len = 1; len <= 15; ++len) {
    left = 2 * left - static_cast<int>(count[len]);
    if (left < 0) return false;
    if (count[len] > 0) max_len = len;
    used += count[len];
  }
  if (left > 0) {
    const bool single = used == 1 && count[1] == 1;
    const bool empty = used == 0;
    if (alphabet == Alphabet::kCodeLength || !(single || (empty && alphabet == Alphabet::kDistance))) {
      return false;
    }
  }
  const unsigned sub_bits = max_len > primary_bits ? max_len - primary_bits : 0;
  std::size_t long_codes = 0;
  for (unsigned len = primary_bits + 1; len <= 15; ++len) long_codes += count[len];
  const std::size_t size = (std::size_t{1} << primary_bits) + long_codes * (std::size_t{1} << sub_bits);
  // A complete code writes every slot that a lookup can reach: no need to clear the
  // previous block's table first. An incomplete one leaves slots invalid (0).
  if (left == 0) {
    table->resize(size);
  } else {
    table->assign(size, 0);
  }
  uint32_t* t = table->data();
  // Symbols in canonical order (by length, then value: RFC 1951 §3.2.2), so that long
  // codes sharing their first primary_bits bits come one after the other and share one
  // subtable.
  uint16_t sorted[kMaxLitSymbols];
  unsigned offset[17] = {};
  for (unsigned len = 1; len <= 15; ++len) offset[len + 1] = offset[len] + count[len];
  for (unsigned s = 0; s < n; ++s) {
    if (lens[s] != 0) sorted[offset[lens[s]]++] = static_cast<uint16_t>(s);
  }
  std::size_t sub_next = std::size_t{1} << primary_bits;
  int64_t sub_prefix = -1;
  std::size_t sub_at = 0;
  uint32_t code = 0;  // the next code of the current length (RFC 1951 §3.2.2 step 3)
  unsigned k = 0;
  for (unsigned len = 1; len <= max_len; ++len) {
    for (unsigned j = 0; j < count[len]; ++j, ++code) {
      const unsigned s = sorted[k++];
      if (len <= primary_bits) {
        const uint32_t e = SymbolEntry(alphabet, s, len);
        for (uint32_t i = Reverse(code, len); i < (1u << primary_bits); i += 1u << len) t[i] = e;
        continue;
      }
      const unsigned rest = len - primary_bits;
      const int64_t prefix = code >> rest;
      if (prefix != sub_prefix) {
        sub_prefix = prefix;
        sub_at = sub_next;
        sub_next += std::size_t{1} << sub_bits;
        t[Reverse(static_cast<uint32_t>(prefix), primary_bits)] =
            kSubFlag | (static_cast<uint32_t>(sub_at) << 16) | (sub_bits << 8) | primary_bits;
      }
      const uint32_t e = SymbolEntry(alphabet, s, rest);
      for (uint32_t i = Reverse(code & ((1u << rest) - 1), rest); i < (1u << sub_bits); i += 1u << rest) {
        t[sub_at + i] = e;
      }
    }
    code <<= 1;  // first code of the next length (step 2)
  }
  return true;
}

const FixedTables& Fixed() {
  static const FixedTables t = [] {
    FixedTables f;
    uint8_t lens[kMaxLitSymbols];
    std::fill(lens, lens + 144, 8);
    std::fill(lens + 144, lens + 256, 9);
    std::fill(lens + 256, lens + 280, 7);
    std::fill(lens + 280, lens + 288, 8);
    BuildTable(lens, kMaxLitSymbols, Alphabet::kLitLen, &f.lit);
    uint8_t dlens[kMaxDistSymbols];
    std::fill(dlens, dlens + kMaxDistSymbols, 5);
    BuildTable(dlens, kMaxDistSymbols, Alphabet::kDistance, &f.dist);
    return f;
  }();
  return t;
}

}  // namespace spexd::core::internal
