// A table-driven deflate block decoder (RFC 1951) for the parallel gzip inflation
// (parallel_inflate.h). libdeflate cannot be used there: it cannot start at an arbitrary
// bit offset, stop at a given block boundary, nor decode without the preceding 32 KiB
// window. This decoder can: it decodes one block at a time from any bit offset, into
// bytes (window known) or into 16-bit symbols whose values >= 256 are markers naming a
// byte of the still unknown window before the start.
#ifndef SPEXD_CORE_IO_INTERNAL_INFLATE_HUFFMAN_H_
#define SPEXD_CORE_IO_INTERNAL_INFLATE_HUFFMAN_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/io/plane_buffer.h"

namespace spexd::core::internal {

// RFC 1951 §3.2: back-references reach at most 32 KiB back.
constexpr std::size_t kDeflateWindow = 32768;
// A 16-bit output symbol >= kMarkerBase is the byte at window position (symbol -
// kMarkerBase) of the 32 KiB before the decoding started (position 32767: the last byte).
constexpr uint16_t kMarkerBase = 256;

// A match reaching back past the start of a 16-bit run's output into the unknown window
// before it: markers for the window's symbols, the rest copied, and no marker-free symbol
// before its end. False for bytes (no window) or a distance past the window.
template <typename Sym>
__attribute__((noinline, cold)) bool CopyFromWindow(Sym* base, std::size_t pos, std::size_t len,
                                                    std::size_t back, std::size_t* marker_end) {
  if (sizeof(Sym) == 1 || back > pos + kDeflateWindow) return false;
  for (std::size_t i = 0; i < len; ++i) {
    const std::ptrdiff_t src = static_cast<std::ptrdiff_t>(pos + i) - static_cast<std::ptrdiff_t>(back);
    base[pos + i] = src < 0 ? static_cast<Sym>(kMarkerBase + kDeflateWindow + src) : base[src];
  }
  *marker_end = pos + len;
  return true;
}

// After a 16-bit match copied from where markers may be (pos - back < *marker_end): moves
// *marker_end past the last marker it copied (markers die out within a few windows; a
// bound moved to every such copy's end would not).
template <typename Sym>
__attribute__((noinline)) void FindMarkers(const Sym* base, std::size_t pos, std::size_t len,
                                           std::size_t* marker_end) {
  for (std::size_t i = len; i > 0; --i) {
    if (base[pos + i - 1] >= kMarkerBase) {
      *marker_end = pos + i;
      return;
    }
  }
}

// Reads the stream LSB-first (RFC 1951 §3.1.1) through a 64-bit buffer refilled with
// unaligned 8-byte loads (little-endian hosts only: x86-64, aarch64). Bytes past the end
// read as zeros; overran() then says the decoding used bits that were not there.
class BitReader {
 public:
  BitReader(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  void Seek(uint64_t bit) {
    pos_ = static_cast<std::size_t>(bit >> 3);
    buf_ = 0;
    count_ = 0;
    Refill();
    Drop(static_cast<unsigned>(bit & 7));
  }
  // Bits consumed since data[0].
  uint64_t BitPos() const { return uint64_t{pos_} * 8 - count_; }
  bool overran() const { return BitPos() > uint64_t{size_} * 8; }

  // Leaves at least 56 valid bits in the buffer.
  void Refill() {
    if (pos_ + 8 <= size_) {
      uint64_t w;
      std::memcpy(&w, data_ + pos_, 8);
      buf_ |= w << count_;
      // Whole bytes that fitted; the bits above count_ are the next bytes' own bits, so
      // OR-ing them again on the next refill changes nothing.
      pos_ += (63 - count_) >> 3;
      count_ |= 56;
    } else {
      while (count_ < 56) {
        buf_ |= uint64_t{pos_ < size_ ? data_[pos_] : uint8_t{0}} << count_;
        ++pos_;
        count_ += 8;
      }
    }
  }
  // The fast decoding loop's refill: no bounds check, the caller has checked FastRoom().
  void RefillFast() {
    uint64_t w;
    std::memcpy(&w, data_ + pos_, 8);
    buf_ |= w << count_;
    pos_ += (63 - count_) >> 3;
    count_ |= 56;
  }
  // True while two RefillFast() in a row (each moves on at most 7 bytes) stay in the data.
  bool FastRoom() const { return pos_ + 15 < size_; }
  uint64_t buffer() const { return buf_; }
  unsigned count() const { return count_; }
  uint32_t Bits(unsigned n) const { return static_cast<uint32_t>(buf_ & ((uint64_t{1} << n) - 1)); }
  void Drop(unsigned n) {
    buf_ >>= n;
    count_ -= n;
  }
  uint32_t Take(unsigned n) {
    const uint32_t v = Bits(n);
    Drop(n);
    return v;
  }
  const uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  // The fast loop's hand-over (inflate_fast.h): it reads with its own copy of the state.
  std::size_t pos() const { return pos_; }
  void Resume(std::size_t pos, uint64_t buf, unsigned count) {
    pos_ = pos;
    buf_ = buf;
    count_ = count;
  }

 private:
  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;  // next byte to load (may pass size_: zeros)
  uint64_t buf_ = 0;
  unsigned count_ = 0;
};

enum class InflateStatus { kOk, kError, kNoRoom };

// A growable array left uninitialised (std::vector would zero what is about to be
// overwritten: a second pass over a chunk's whole output), drawn from `pool` when set so
// that a server reuses the memory from frame to frame (no page faults). Grow may throw
// std::bad_alloc.
template <typename T>
class ScratchBuffer {
 public:
  explicit ScratchBuffer(PlaneBufferPool* pool = nullptr) : pool_(pool) {}
  T* data() { return buf_.data(); }
  const T* data() const { return buf_.data(); }
  std::size_t size() const { return buf_.size(); }
  // At least n elements, the first `keep` kept.
  void Grow(std::size_t n, std::size_t keep) {
    if (n <= buf_.size()) return;
    PlaneBuffer<T> bigger = PlaneBuffer<T>::Make(n, pool_);
    if (keep > 0) std::memcpy(bigger.data(), buf_.data(), keep * sizeof(T));
    buf_ = std::move(bigger);
  }

 private:
  PlaneBufferPool* pool_;
  PlaneBuffer<T> buf_;
};

// Bytes kept in segments (a chunk's tail, parallel_inflate.cc): when one is full, the next
// starts with a copy of its last window, the history that back-references need, instead
// of the whole output being copied into a larger buffer. Segment k holds used[k] bytes,
// of which the first kDeflateWindow repeat the bytes before them (the first segment's:
// the last window of what its owner decoded before).
struct ByteSegments {
  explicit ByteSegments(PlaneBufferPool* buffer_pool) : pool(buffer_pool) {}
  void Clear() {
    buffers.clear();
    used.clear();
    before = 0;
  }
  PlaneBufferPool* pool;
  std::vector<ScratchBuffer<uint8_t>> buffers;
  std::vector<std::size_t> used;  // one per finished segment
  std::size_t before = 0;        // bytes in the finished segments, less their windows
};

// Where a block's output goes: data[pos, cap), growing `grow`, or for bytes continuing in
// a new segment of `segments`, up to `limit` symbols when either is set (a segmented
// output counts its symbols as one buffer would: segments->before + pos). History for
// back-references is data[0, pos): the whole output of this run, or a segment's window
// and what followed it.
template <typename Sym>
struct InflateOutput {
  Sym* data = nullptr;
  std::size_t pos = 0;
  std::size_t cap = 0;
  ScratchBuffer<Sym>* grow = nullptr;
  ByteSegments* segments = nullptr;  // bytes only; data is then its last buffer
  std::size_t limit = 0;
  // 16-bit output only: every symbol at or after marker_end is free of markers.
  std::size_t marker_end = 0;
  // Makes room for `need` more symbols plus the word-copy slack; false when it cannot
  // (over `limit`, no way to grow, or out of memory).
  // May move data and (a new segment) pos.
  bool Reserve(std::size_t need);
};

// One block at a time: ReadHeader, then DecodeBody. Holds the current block's tables.
class BlockDecoder {
 public:
  BlockDecoder();
  // Reads a block header (RFC 1951 §3.2.3) at the reader's position and builds its codes.
  // kError for a reserved block type, a bad stored length, HLIT > 286, HDIST > 30, code
  // lengths that overrun, over-subscribed or (but for the cases zlib allows) incomplete
  // codes, or no end-of-block code.
  InflateStatus ReadHeader(BitReader& in, bool* final);
  // Decodes the body up to and including its end-of-block code. kNoRoom when the output
  // cannot grow enough (nothing past out.cap is written); kError for an invalid symbol,
  // a distance before the available history, or bits read past the end of the input.
  template <typename Sym>
  InflateStatus DecodeBody(BitReader& in, InflateOutput<Sym>& out);
  // The current block: stored (no tables), or its tables (inflate_tables.h).
  bool stored() const { return type_ == 0; }
  const uint32_t* lit() const { return lit_; }
  const uint32_t* dist() const { return dist_; }

 private:
  template <typename Sym>
  InflateStatus CopyStored(BitReader& in, InflateOutput<Sym>& out);
  bool ReadDynamicCodes(BitReader& in);

  int type_ = 0;             // BTYPE: 0 stored, 1 fixed, 2 dynamic
  uint32_t stored_len_ = 0;  // stored blocks: LEN
  const uint32_t* lit_ = nullptr;
  const uint32_t* dist_ = nullptr;
  std::vector<uint32_t> lit_table_, dist_table_;
};

// True when the bits at `bit` begin a non-final dynamic-Huffman block whose header is
// valid (BlockDecoder::ReadHeader's checks), or a non-final stored block with zero
// padding bits and LEN == ~NLEN: where a chunk's speculative decoding may start.
bool PlausibleBlockStart(BitReader& probe, uint64_t bit, BlockDecoder& decoder);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_IO_INTERNAL_INFLATE_HUFFMAN_H_
