#include "core/io/internal/inflate_huffman.h"

#include <algorithm>
#include <new>

#include "core/io/internal/inflate_fast.h"
#include "core/io/internal/inflate_tables.h"

namespace spexd::core::internal {
namespace {

constexpr std::size_t kMaxMatch = 258;  // RFC 1951 §3.2.5

// Looks up the next symbol of `table` and drops its code (not its extra bits); the caller
// has refilled the reader.
inline uint32_t Decode(BitReader& r, const uint32_t* table, unsigned primary_bits) {
  uint32_t e = table[r.Bits(primary_bits)];
  if (e & kSubFlag) {
    r.Drop(DropBits(e));
    e = table[Value(e) + r.Bits(CodeBits(e))];
  }
  r.Drop(CodeBits(e));
  return e;
}

// The checked loop's copy of the match (len, back) to data[pos, pos + len), symbol by
// symbol (the fast loop's copies in moves: inflate_fast.cc). False for a distance too far
// back.
template <typename Sym>
inline bool CopyMatch(Sym* data, std::size_t pos, std::size_t len, std::size_t back, std::size_t* marker_end) {
  if (back > pos) return CopyFromWindow(data, pos, len, back, marker_end);
  for (std::size_t i = 0; i < len; ++i) data[pos + i] = data[pos - back + i];
  if (sizeof(Sym) > 1 && pos - back < *marker_end) FindMarkers(data, pos, len, marker_end);
  return true;
}

}  // namespace

template <typename Sym>
bool InflateOutput<Sym>::Reserve(std::size_t need) {
  if (cap - pos >= need) return true;
  if constexpr (sizeof(Sym) == 1) {
    if (segments != nullptr) {
      // The same sizes as one growing buffer (so the same kNoRoom), in a new segment.
      const std::size_t before = segments->before;
      if (before + pos + need > limit) return false;
      const std::size_t want = std::min(limit, std::max(before + pos + need, 2 * (before + cap) + 4096));
      ScratchBuffer<uint8_t> next(segments->pool);
      try {
        next.Grow(want - (before + pos - kDeflateWindow), 0);
      } catch (const std::bad_alloc&) {
        return false;  // as over the limit: the caller decodes this stretch another way
      }
      std::memcpy(next.data(), data + pos - kDeflateWindow, kDeflateWindow);
      segments->used.push_back(pos);
      segments->before = before + pos - kDeflateWindow;
      segments->buffers.push_back(std::move(next));
      data = segments->buffers.back().data();
      cap = want - segments->before;
      pos = kDeflateWindow;
      return true;
    }
  }
  if (grow == nullptr || pos + need > limit) return false;
  const std::size_t want = std::min(limit, std::max(pos + need, 2 * cap + 4096));
  try {
    grow->Grow(want, pos);
  } catch (const std::bad_alloc&) {
    return false;
  }
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
  if (!BuildTable(cl_lens, 19, Alphabet::kCodeLength, &cl)) return false;
  uint8_t lens[286 + 30];
  const unsigned n = hlit + hdist;
  for (unsigned i = 0; i < n;) {
    in.Refill();
    const uint32_t e = Decode(in, cl.data(), kCodeLenBits);
    if (!(e & kLitFlag)) return false;
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
  return BuildTable(lens, hlit, Alphabet::kLitLen, &lit_table_) &&
         BuildTable(lens + hlit, hdist, Alphabet::kDistance, &dist_table_);
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
  const uint32_t* const lit = lit_;
  const uint32_t* const dist = dist_;
  Sym* data = out.data;
  std::size_t pos = out.pos, cap = out.cap, marker_end = out.marker_end;
  constexpr std::size_t kWord = 8 / sizeof(Sym);
  InflateStatus status = InflateStatus::kOk;
  for (;;) {
    // The bulk of the block, while the input and the output have room (inflate_fast.h).
    if (__builtin_expect(cap - pos >= kFastOutRoom && in.FastRoom(), 1)) {
      FastLoopState<Sym> f{in.data() + in.pos(), in.data() + in.size(), in.buffer(), in.count(),
                           data, data + pos, data + cap, marker_end, lit, dist};
      const FastLoopExit exit = RunFastLoop(f);
      in.Resume(static_cast<std::size_t>(f.in - in.data()), f.buf, f.count);
      pos = static_cast<std::size_t>(f.out - data);
      marker_end = f.marker_end;
      if (exit == FastLoopExit::kEnd) break;
      if (exit == FastLoopExit::kError) {
        status = InflateStatus::kError;
        break;
      }
    }
    if (cap - pos < kMaxMatch + kWord) {
      out.pos = pos;
      out.Reserve(kMaxMatch + kWord);  // may fail: the exact checks below then guard
      data = out.data;
      pos = out.pos;
      cap = out.cap;
      if (cap - pos >= kFastOutRoom && in.FastRoom()) continue;
    }
    // One symbol with every check, near the end of the input or of the output's room.
    in.Refill();  // >= 56 bits: a length, its extra bits, a distance and its extra bits
    const uint32_t e = Decode(in, lit, kLitBits);
    if (e & kLitFlag) {
      if (pos == cap) {
        status = InflateStatus::kNoRoom;
        break;
      }
      data[pos++] = static_cast<Sym>(Value(e));
      continue;
    }
    if (e & kEndFlag) {
      if (in.overran()) status = InflateStatus::kError;
      break;
    }
    if (!(e & kMatchFlag)) {
      status = InflateStatus::kError;
      break;
    }
    const std::size_t len = Value(e) + in.Take(DropBits(e) - CodeBits(e));
    const uint32_t d = Decode(in, dist, kDistBits);
    if (!(d & kMatchFlag)) {
      status = InflateStatus::kError;
      break;
    }
    const std::size_t back = Value(d) + in.Take(DropBits(d) - CodeBits(d));
    if (len > cap - pos) {
      status = InflateStatus::kNoRoom;
      break;
    }
    if (!CopyMatch(data, pos, len, back, &marker_end)) {
      status = InflateStatus::kError;
      break;
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
