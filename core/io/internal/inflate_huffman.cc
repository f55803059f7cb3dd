#include "core/io/internal/inflate_huffman.h"

#include <algorithm>
#include <array>

namespace spexd::core::internal {
namespace {

// A decode-table entry: bits 0-4 the code bits to drop, 5-8 the extra bits that follow
// (or a subtable's index bits), 9-11 the kind, 16-31 the value (literal byte, length or
// distance base, subtable offset).
enum Kind : uint32_t { kInvalid = 0, kLiteral, kLength, kEnd, kSub, kDist };
constexpr uint32_t Entry(uint32_t kind, uint32_t value, uint32_t extra, uint32_t nbits) {
  return nbits | (extra << 5) | (kind << 9) | (value << 16);
}
inline uint32_t NBits(uint32_t e) { return e & 31; }
inline uint32_t Extra(uint32_t e) { return (e >> 5) & 15; }
inline uint32_t KindOf(uint32_t e) { return (e >> 9) & 7; }
inline uint32_t Value(uint32_t e) { return e >> 16; }

// Primary table index bits: most codes resolve in one lookup, the longest (to 15 bits,
// RFC 1951 §3.2.7) through a second one.
constexpr unsigned kLitBits = 11, kDistBits = 8, kCodeLenBits = 7;
constexpr std::size_t kMaxMatch = 258;  // RFC 1951 §3.2.5
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

uint32_t LitEntry(unsigned sym) {
  if (sym < 256) return Entry(kLiteral, sym, 0, 0);
  if (sym == 256) return Entry(kEnd, 0, 0, 0);
  if (sym <= 285) return Entry(kLength, Bases().len_base[sym - 257], Bases().len_extra[sym - 257], 0);
  return Entry(kInvalid, 0, 0, 0);  // 286, 287: part of the fixed code, never valid
}
uint32_t DistEntry(unsigned sym) {
  if (sym < 30) return Entry(kDist, Bases().dist_base[sym], Bases().dist_extra[sym], 0);
  return Entry(kInvalid, 0, 0, 0);
}
uint32_t CodeLenEntry(unsigned sym) { return Entry(kLiteral, sym, 0, 0); }

uint32_t Reverse(uint32_t code, unsigned bits) {
  uint32_t r = 0;
  for (unsigned i = 0; i < bits; ++i, code >>= 1) r = (r << 1) | (code & 1);
  return r;
}

enum class Completeness { kComplete, kLitLen, kDistance };

// Builds the decode table of the canonical code with lengths lens[0, n) (RFC 1951
// §3.2.2). Deflate sends codes MSB first in an LSB-first stream, so entries are indexed
// by the bit-reversed code. False for an over-subscribed code, and for an incomplete one
// except where zlib and libdeflate accept it: a single code of 1 bit, or (distances) no
// code at all. Unused slots of an accepted incomplete code stay kInvalid.
bool BuildTable(const uint8_t* lens, unsigned n, unsigned primary_bits, uint32_t (*entry)(unsigned),
                Completeness mode, std::vector<uint32_t>* table) {
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
    if (mode == Completeness::kComplete || !(single || (empty && mode == Completeness::kDistance))) {
      return false;
    }
  }
  const unsigned sub_bits = max_len > primary_bits ? max_len - primary_bits : 0;
  std::size_t long_codes = 0;
  for (unsigned len = primary_bits + 1; len <= 15; ++len) long_codes += count[len];
  table->assign((std::size_t{1} << primary_bits) + long_codes * (std::size_t{1} << sub_bits), 0);
  uint32_t* t = table->data();
  // First code of each length (RFC 1951 §3.2.2 step 2).
  uint32_t next[16] = {};
  uint32_t code = 0;
  for (unsigned len = 1; len <= 15; ++len) {
    code = (code + count[len - 1]) << 1;
    next[len] = code;
  }
  // Symbols in canonical order (by length, then value), so that long codes sharing their
  // first primary_bits bits come one after the other and share one subtable.
  std::size_t sub_next = std::size_t{1} << primary_bits;
  int64_t sub_prefix = -1;
  std::size_t sub_at = 0;
  for (unsigned len = 1; len <= max_len; ++len) {
    for (unsigned s = 0; s < n; ++s) {
      if (lens[s] != len) continue;
      const uint32_t c = next[len]++;
      if (len <= primary_bits) {
        const uint32_t e = entry(s) | len;
        for (uint32_t i = Reverse(c, len); i < (1u << primary_bits); i += 1u << len) t[i] = e;
        continue;
      }
      const unsigned rest = len - primary_bits;
      const int64_t prefix = c >> rest;
      if (prefix != sub_prefix) {
        sub_prefix = prefix;
        sub_at = sub_next;
        sub_next += std::size_t{1} << sub_bits;
        t[Reverse(static_cast<uint32_t>(prefix), primary_bits)] =
            Entry(kSub, static_cast<uint32_t>(sub_at), sub_bits, primary_bits);
      }
      const uint32_t e = entry(s) | rest;
      for (uint32_t i = Reverse(c & ((1u << rest) - 1), rest); i < (1u << sub_bits); i += 1u << rest) {
        t[sub_at + i] = e;
      }
    }
  }
  return true;
}

// The fixed codes of BTYPE 01 (RFC 1951 §3.2.6), built once.
struct FixedTables {
  std::vector<uint32_t> lit, dist;
  FixedTables() {
    uint8_t lens[kMaxLitSymbols];
    std::fill(lens, lens + 144, 8);
    std::fill(lens + 144, lens + 256, 9);
    std::fill(lens + 256, lens + 280, 7);
    std::fill(lens + 280, lens + 288, 8);
    BuildTable(lens, kMaxLitSymbols, kLitBits, LitEntry, Completeness::kLitLen, &lit);
    uint8_t dlens[kMaxDistSymbols];
    std::fill(dlens, dlens + kMaxDistSymbols, 5);
    BuildTable(dlens, kMaxDistSymbols, kDistBits, DistEntry, Completeness::kDistance, &dist);
  }
};
const FixedTables& Fixed() {
  static const FixedTables t;
  return t;
}

// Looks up the next symbol of `table`; the caller has refilled the reader.
inline uint32_t Decode(BitReader& r, const uint32_t* table, unsigned primary_bits) {
  uint32_t e = table[r.Bits(primary_bits)];
  if (KindOf(e) == kSub) {
    r.Drop(primary_bits);
    e = table[Value(e) + r.Bits(Extra(e))];
  }
  r.Drop(NBits(e));
  return e;
}

}  // namespace

template <typename Sym>
bool InflateOutput<Sym>::Reserve(std::size_t need) {
  if (cap - pos >= need) return true;
  if (grow == nullptr || pos + need > limit) return false;
  const std::size_t want = std::min(limit, std::max(pos + need, 2 * cap + 4096));
  grow->Grow(want, pos);
  data = grow->data();
  cap = want;
  return true;
}

BlockDecoder::BlockDecoder() {
  Fixed();  // builds the static tables now, not on a decoding thread's first fixed block
}

InflateStatus BlockDecoder::ReadHeader(BitReader& in, bool* final) {
  in.Refill();
  *final = in.Take(1) != 0;
  type_ = static_cast<int>(in.Take(2));
  if (type_ == 0) {
    // Stored (RFC 1951 §3.2.4): skip to the byte boundary, then LEN and its complement.
    in.Drop(in.count() & 7);
    in.Refill();
    stored_len_ = in.Take(16);
    if ((in.Take(16) ^ 0xFFFF) != stored_len_ || in.overran()) return InflateStatus::kError;
    return InflateStatus::kOk;
  }
  if (type_ == 1) {
    lit_ = Fixed().lit.data();
    dist_ = Fixed().dist.data();
    return InflateStatus::kOk;
  }
  if (type_ != 2 || !ReadDynamicCodes(in) || in.overran()) return InflateStatus::kError;
  lit_ = lit_table_.data();
  dist_ = dist_table_.data();
  return InflateStatus::kOk;
}

// RFC 1951 §3.2.7: the code-length code, then the literal/length and distance code
// lengths run-length coded with it.
bool BlockDecoder::ReadDynamicCodes(BitReader& in) {
  static constexpr uint8_t kOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  in.Refill();
  const unsigned hlit = in.Take(5) + 257, hdist = in.Take(5) + 1, hclen = in.Take(4) + 4;
  if (hlit > 286 || hdist > 30) return false;
  uint8_t cl_lens[19] = {};
  for (unsigned i = 0; i < hclen; ++i) {
    if (i == 12) in.Refill();  // 14 + 19 * 3 bits > 56
    cl_lens[kOrder[i]] = static_cast<uint8_t>(in.Take(3));
  }
  std::vector<uint32_t>& cl = dist_table_;  // scratch until the distance code is built
  if (!BuildTable(cl_lens, 19, kCodeLenBits, CodeLenEntry, Completeness::kComplete, &cl)) return false;
  uint8_t lens[286 + 30];
  const unsigned n = hlit + hdist;
  for (unsigned i = 0; i < n;) {
    in.Refill();
    const uint32_t e = Decode(in, cl.data(), kCodeLenBits);
    if (KindOf(e) != kLiteral) return false;
    const uint32_t sym = Value(e);
    if (sym < 16) {
      lens[i++] = static_cast<uint8_t>(sym);
      continue;
    }
    uint8_t fill = 0;
    unsigned rep;
    if (sym == 16) {
      if (i == 0) return false;
      fill = lens[i - 1];
      rep = 3 + in.Take(2);
    } else if (sym == 17) {
      rep = 3 + in.Take(3);
    } else {
      rep = 11 + in.Take(7);
    }
    if (rep > n - i) return false;
    std::fill(lens + i, lens + i + rep, fill);
    i += rep;
  }
  if (lens[256] == 0) return false;  // a block must be able to end
  return BuildTable(lens, hlit, kLitBits, LitEntry, Completeness::kLitLen, &lit_table_) &&
         BuildTable(lens + hlit, hdist, kDistBits, DistEntry, Completeness::kDistance, &dist_table_);
}

template <typename Sym>
InflateStatus BlockDecoder::CopyStored(BitReader& in, InflateOutput<Sym>& out) {
  const uint64_t at = in.BitPos() / 8;  // byte aligned by ReadHeader
  if (at + stored_len_ > in.size()) return InflateStatus::kError;
  if (!out.Reserve(stored_len_)) return InflateStatus::kNoRoom;
  const uint8_t* src = in.data() + at;
  std::copy(src, src + stored_len_, out.data + out.pos);
  out.pos += stored_len_;
  in.Seek((at + stored_len_) * 8);
  return InflateStatus::kOk;
}

template <typename Sym>
InflateStatus BlockDecoder::DecodeBody(BitReader& in_ref, InflateOutput<Sym>& out) {
  if (type_ == 0) return CopyStored(in_ref, out);
  // Locals, not the caller's objects: stores through a byte pointer could alias those,
  // and the compiler would then reload them after every output byte.
  BitReader in = in_ref;
  const uint32_t* lit = lit_;
  const uint32_t* dist = dist_;
  Sym* data = out.data;
  std::size_t pos = out.pos, cap = out.cap, marker_end = out.marker_end;
  constexpr std::size_t kWord = 8 / sizeof(Sym);  // symbols per 8-byte copy
  InflateStatus status = InflateStatus::kOk;
  for (;;) {
    if (__builtin_expect(cap - pos < kMaxMatch + kWord, 0)) {
      out.pos = pos;
      out.Reserve(kMaxMatch + kWord);  // may fail: the exact checks below then guard
      data = out.data;
      cap = out.cap;
    }
    in.Refill();  // >= 56 bits: a length, its extra bits, a distance and its extra bits
    uint32_t e = Decode(in, lit, kLitBits);
    if (__builtin_expect(KindOf(e) == kLiteral, 1)) {
      if (pos == cap) {
        status = InflateStatus::kNoRoom;
        break;
      }
      data[pos++] = static_cast<Sym>(Value(e));
      // >= 41 bits left: a second symbol without refilling (float data are mostly
      // literals); a length after it refills first.
      e = Decode(in, lit, kLitBits);
      if (__builtin_expect(KindOf(e) == kLiteral, 1)) {
        if (pos == cap) {
          status = InflateStatus::kNoRoom;
          break;
        }
        data[pos++] = static_cast<Sym>(Value(e));
        continue;
      }
      in.Refill();
    }
    if (KindOf(e) == kEnd) {
      if (in.overran()) status = InflateStatus::kError;
      break;
    }
    if (KindOf(e) != kLength) {
      status = InflateStatus::kError;
      break;
    }
    const std::size_t len = Value(e) + in.Take(Extra(e));
    const uint32_t d = Decode(in, dist, kDistBits);
    if (KindOf(d) != kDist) {
      status = InflateStatus::kError;
      break;
    }
    const std::size_t back = Value(d) + in.Take(Extra(d));
    if (len > cap - pos) {
      status = InflateStatus::kNoRoom;
      break;
    }
    Sym* to = data + pos;
    if (__builtin_expect(back > pos, 0)) {
      // Before this run's output: only a 16-bit run may reach into the unknown window.
      if (sizeof(Sym) == 1 || back > pos + kDeflateWindow) {
        status = InflateStatus::kError;
        break;
      }
      for (std::size_t i = 0; i < len; ++i) {
        const std::ptrdiff_t src = static_cast<std::ptrdiff_t>(pos + i) - static_cast<std::ptrdiff_t>(back);
        to[i] = src < 0 ? static_cast<Sym>(kMarkerBase + kDeflateWindow + src) : data[src];
      }
      marker_end = pos + len;
      pos += len;
      continue;
    }
    const Sym* from = to - back;
    if (back >= kWord && cap - pos >= len + kWord) {
      // 8 bytes at a time; may write up to kWord - 1 symbols past the match (within cap),
      // which the next symbols overwrite.
      Sym* const end = to + len;
      do {
        std::memcpy(to, from, 8);
        to += kWord;
        from += kWord;
      } while (to < end);
    } else if (sizeof(Sym) == 1 && back == 1) {
      std::memset(to, static_cast<int>(*from), len);
    } else {
      for (std::size_t i = 0; i < len; ++i) to[i] = from[i];
    }
    if (sizeof(Sym) > 1 && pos - back < marker_end) {
      // Copied from where markers may be: look at what was copied (markers die out
      // within a few windows; a bound moved to every such copy's end would not).
      for (std::size_t i = len; i > 0; --i) {
        if (data[pos + i - 1] >= kMarkerBase) {
          marker_end = pos + i;
          break;
        }
      }
    }
    pos += len;
  }
  out.pos = pos;
  out.marker_end = marker_end;
  in_ref = in;
  return status;
}

bool PlausibleBlockStart(BitReader& probe, uint64_t bit, BlockDecoder& decoder) {
  probe.Seek(bit);
  const uint32_t head = probe.Bits(13);
  bool final = false;
  if ((head & 7) == 4) {
    // BFINAL 0, BTYPE 2; HLIT and HDIST within range before the costlier checks.
    if (((head >> 3) & 31) > 29 || ((head >> 8) & 31) > 29) return false;
  } else if ((head & 7) == 0) {
    // BFINAL 0, BTYPE 0: encoders pad with zero bits to the byte boundary.
    const unsigned pad = (8 - static_cast<unsigned>((bit + 3) & 7)) & 7;
    if (((head >> 3) & ((1u << pad) - 1)) != 0) return false;
  } else {
    return false;
  }
  return decoder.ReadHeader(probe, &final) == InflateStatus::kOk && !final;
}

template struct InflateOutput<uint8_t>;
template struct InflateOutput<uint16_t>;
template InflateStatus BlockDecoder::DecodeBody(BitReader&, InflateOutput<uint8_t>&);
template InflateStatus BlockDecoder::DecodeBody(BitReader&, InflateOutput<uint16_t>&);

}  // namespace spexd::core::internal
