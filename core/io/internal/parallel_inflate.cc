#include "core/io/internal/parallel_inflate.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include "core/base/parallel_for.h"
#include "core/io/internal/inflate_huffman.h"
#include "core/io/internal/inflate_pair.h"

namespace spexd::core::internal {
namespace {

constexpr std::size_t kWindow = kDeflateWindow;
constexpr std::size_t kTrailer = 8;  // CRC32 and ISIZE (RFC 1952 §2.2)
constexpr uint64_t kMaxSearchBits = uint64_t{8} << 19;  // 512 KiB of compressed data

uint32_t Le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// The offset of the deflate data after the member header (RFC 1952 §2.3), or 0 for a
// header this path does not take (libdeflate then judges it).
std::size_t DeflateStart(const uint8_t* p, std::size_t n) {
  if (n < 10 + kTrailer || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8 || (p[3] & 0xE0) != 0) return 0;
  const uint8_t flags = p[3];
  std::size_t at = 10;
  if (flags & 4) {  // FEXTRA
    if (at + 2 > n) return 0;
    at += 2 + (static_cast<std::size_t>(p[at]) | (static_cast<std::size_t>(p[at + 1]) << 8));
  }
  for (const uint8_t field : {uint8_t{8}, uint8_t{16}}) {  // FNAME, FCOMMENT: zero-terminated
    if (!(flags & field)) continue;
    const void* zero = at < n ? std::memchr(p + at, 0, n - at) : nullptr;
    if (zero == nullptr) return 0;
    at = static_cast<std::size_t>(static_cast<const uint8_t*>(zero) - p) + 1;
  }
  if (flags & 2) at += 2;  // FHCRC
  return at + kTrailer <= n ? at : 0;
}

// What one chunk decoded: 16-bit symbols (head) until its output was free of window
// markers for a whole window, then bytes (tail, in segments each starting with the window
// before it: the first with the end of head, so that back-references have their history).
struct Chunk {
  explicit Chunk(PlaneBufferPool* pool) : head(pool), tail(pool) {}
  bool ok = false, final = false;
  bool stored_first = false;  // its first block is a stored one
  uint64_t begin_bit = 0, end_bit = 0;
  ScratchBuffer<uint16_t> head;
  ByteSegments tail;
  std::size_t head_size = 0, tail_size = 0;  // tail_size: bytes, less the windows
  std::size_t size() const { return head_size + tail_size; }
};

// A chunk's decoding, in steps so that a thread can interleave two chunks' byte stretches
// (inflate_pair.h): Start() and AfterTail() return true while a stretch of bytes waits in
// run(), false once the chunk is settled.
class ChunkJob {
 public:
  virtual ~ChunkJob() = default;
  virtual bool Start() = 0;
  virtual bool AfterTail() = 0;
  ByteRun& run() { return run_; }

 protected:
  ByteRun run_{};
};

// Chunk 0: from the true start, with a known (empty) window, straight into `out`, until a
// final block ends or a block boundary at or after stop_bit.
class FirstChunkJob : public ChunkJob {
 public:
  FirstChunkJob(const uint8_t* data, std::size_t n, uint64_t start_bit, uint64_t stop_bit, uint8_t* out,
                std::size_t capacity, Chunk* c, std::atomic<uint64_t>* member_end, bool* ok,
                std::size_t* size)
      : in_(data, n), c_(c), member_end_(member_end), ok_(ok), size_(size) {
    in_.Seek(start_bit);
    out_.data = out;
    out_.cap = capacity;
    run_ = ByteRun{&in_, &dec_, &out_, stop_bit};
  }
  bool Start() override { return true; }
  bool AfterTail() override {
    *ok_ = run_.status == InflateStatus::kOk;
    *size_ = out_.pos;
    c_->final = run_.final;
    c_->end_bit = in_.BitPos();
    if (*ok_ && c_->final) member_end_->store(c_->end_bit, std::memory_order_relaxed);
    return false;
  }

 private:
  BitReader in_;
  BlockDecoder dec_;
  InflateOutput<uint8_t> out_;
  Chunk* c_;
  std::atomic<uint64_t>* member_end_;
  bool* ok_;
  std::size_t* size_;
};

// Chunk k > 0: from the first plausible block start in [lo, hi), decoded without the window
// before it, until a final block ends or a block boundary at or after stop_bit, producing
// at most `limit` bytes; 16-bit symbols (markers for the window) until its last window is
// free of markers, then bytes, the stretch that run() carries. A decoding error means a
// false start: the search goes on from the next bit. Over the limit (kNoRoom), or past the
// member's end that chunk 0 found, the chunk is given up (a later start would be too).
class LaterChunkJob : public ChunkJob {
 public:
  LaterChunkJob(const uint8_t* data, std::size_t n, uint64_t lo, uint64_t hi, uint64_t stop_bit,
                std::size_t limit, std::size_t expect, const std::atomic<uint64_t>& member_end, Chunk* c)
      : probe_(data, n), in_(data, n), next_(lo), lo_(lo),
        // Encoders end a block every few tens of KB of compressed data (zlib: 16K-32K
        // symbols); a stream without plausible headers (fixed-Huffman blocks only) is not
        // searched whole.
        hi_(std::min(hi, lo + kMaxSearchBits)), stop_bit_(stop_bit), limit_(limit), expect_(expect),
        member_end_(member_end), c_(c) {}

  bool Start() override { return Search(); }

  bool AfterTail() override {
    if (run_.status == InflateStatus::kOk) {
      Settle(run_.final, true);
      c_->ok = true;
      return false;
    }
    return run_.status == InflateStatus::kError && Search();
  }

 private:
  enum class Head { kSettled, kGiveUp, kFalseStart, kTail };

  bool Search() {
    while (next_ < hi_ && lo_ <= member_end_.load(std::memory_order_relaxed)) {
      const uint64_t bit = next_++;
      if (!PlausibleBlockStart(probe_, bit, dec_)) continue;
      Head h;
      try {
        h = DecodeHead(bit);
      } catch (const std::bad_alloc&) {
        h = Head::kGiveUp;  // out of memory for its output: decoded sequentially instead
      }
      if (h == Head::kTail) return true;
      if (h == Head::kSettled) c_->ok = true;
      if (h != Head::kFalseStart) return false;
    }
    return false;
  }

  Head DecodeHead(uint64_t bit) {
    in_.Seek(bit);
    c_->begin_bit = bit;
    c_->tail.Clear();
    c_->tail_size = 0;
    c_->stored_first = ((in_.Bits(3) >> 1) & 3) == 0;  // BTYPE 00
    c_->head.Grow(std::min(limit_, std::size_t{1} << 18), 0);
    head_ = InflateOutput<uint16_t>{};
    head_.grow = &c_->head;
    head_.data = c_->head.data();
    head_.cap = c_->head.size();
    head_.limit = limit_;
    bool final = false;
    for (;;) {
      if (dec_.ReadHeader(in_, &final) != InflateStatus::kOk) return Head::kFalseStart;
      const InflateStatus body = dec_.DecodeBody(in_, head_);
      if (body == InflateStatus::kError) return Head::kFalseStart;
      if (body != InflateStatus::kOk) return Head::kGiveUp;
      if (final || in_.BitPos() >= stop_bit_) {
        Settle(final, false);
        return Head::kSettled;
      }
      if (bit > member_end_.load(std::memory_order_relaxed)) return Head::kGiveUp;
      if (head_.pos >= head_.marker_end + kWindow) break;
    }
    // The last window holds no markers, nor will anything after it: on in bytes, half the
    // memory traffic, with no resolution pass for the rest of the chunk.
    const std::size_t want = std::max(expect_ + expect_ / 4, 2 * kWindow) + kWindow;
    c_->tail.buffers.emplace_back(c_->tail.pool);
    c_->tail.buffers.back().Grow(want, 0);
    tail_ = InflateOutput<uint8_t>{};
    tail_.data = c_->tail.buffers.back().data();
    std::copy(c_->head.data() + head_.pos - kWindow, c_->head.data() + head_.pos, tail_.data);
    tail_.segments = &c_->tail;
    tail_.cap = want;
    tail_.pos = kWindow;
    tail_.limit = limit_ - head_.pos + kWindow;
    run_ = ByteRun{&in_, &dec_, &tail_, stop_bit_, &member_end_, bit};
    return Head::kTail;
  }

  void Settle(bool final, bool bytes) {
    c_->final = final;
    c_->end_bit = in_.BitPos();
    c_->head_size = head_.pos;
    c_->tail_size = 0;
    if (bytes) {
      c_->tail.used.push_back(tail_.pos);
      c_->tail_size = c_->tail.before + tail_.pos - kWindow;
    }
  }

  BitReader probe_, in_;
  BlockDecoder dec_;
  uint64_t next_, lo_, hi_, stop_bit_;
  std::size_t limit_, expect_;
  const std::atomic<uint64_t>& member_end_;
  Chunk* c_;
  InflateOutput<uint16_t> head_;
  InflateOutput<uint8_t> tail_;
};

// A thread's chunks: one, or two decoded in turn (ParallelInflateOptions::pair_chunks).
int ChunksPerThread(const ParallelInflateOptions& options) { return options.pair_chunks ? 2 : 1; }

// Runs one or two jobs to the end, their byte stretches interleaved while both have one.
void RunJobs(ChunkJob* a, ChunkJob* b) {
  bool wait_a = a->Start(), wait_b = b != nullptr && b->Start();
  while (wait_a || wait_b) {
    const bool ran_a = wait_a, ran_b = wait_b;
    if (ran_a && ran_b) {
      DecodeBytesPair(a->run(), b->run());
    } else {
      DecodeBytesAlone(ran_a ? a->run() : b->run());
    }
    if (ran_a) wait_a = a->AfterTail();
    if (ran_b) wait_b = b->AfterTail();
  }
}

// Writes the chunk's output symbols [from, to) to out[off + from, off + to), markers
// resolved from out[off - kWindow, off), which must hold their final bytes.
bool WriteRange(const Chunk& c, uint8_t* out, std::size_t off, std::size_t from, std::size_t to) {
  std::size_t i = from;
  for (; i < std::min(to, c.head_size); ++i) {
    const uint16_t v = c.head.data()[i];
    if (v < kMarkerBase) {
      out[off + i] = static_cast<uint8_t>(v);
      continue;
    }
    const std::size_t back = kWindow - (v - kMarkerBase);  // 1..kWindow bytes before off
    if (back > off) return false;                         // before the member's output
    out[off + i] = out[off - back];
  }
  // Segment k holds the tail's bytes [start, start + used[k] - kWindow), after its window.
  std::size_t start = c.head_size;
  for (std::size_t k = 0; k < c.tail.used.size() && i < to; ++k) {
    const std::size_t end = start + c.tail.used[k] - kWindow;
    if (i < end) {
      const std::size_t n = std::min(to, end) - i;
      std::memcpy(out + off + i, c.tail.buffers[k].data() + kWindow + (i - start), n);
      i += n;
    }
    start = end;
  }
  return true;
}

// True when decoding from `bit` (where the previous chunk stopped) decodes what `c` did.
// A stored block's header is 3 zero bits and zero padding up to LEN (RFC 1951 §3.2.4), so
// the search may find it a few bits early, at an equivalent start: the same LEN, read
// after zero bits only.
bool Chains(const Chunk& c, uint64_t bit) {
  if (c.begin_bit == bit) return true;
  return c.stored_first && c.begin_bit < bit && (c.begin_bit + 10) / 8 == (bit + 10) / 8;
}

}  // namespace

bool PairChunksByDefault() {
  static const bool pair = [] {
    const char* v = std::getenv("SPEXD_INFLATE_PAIRS");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return pair;
}

int ParallelInflateChunks(std::size_t in_size, const ParallelInflateOptions& options) {
  const std::size_t by_size = in_size / std::max<std::size_t>(options.min_chunk_bytes, 1);
  const std::size_t threads = static_cast<std::size_t>(std::max(options.max_threads, 1));
  // A lone thread keeps libdeflate (pairs measured against it only with a pool).
  const std::size_t per_thread = threads > 1 ? static_cast<std::size_t>(ChunksPerThread(options)) : 1;
  return static_cast<int>(std::min(by_size, per_thread * threads));
}

bool ParallelInflate(absl::string_view in_view, char* out_chars, std::size_t capacity,
                     const ParallelInflateOptions& options, std::size_t* in_used,
                     std::size_t* out_used) {
  const auto* in = reinterpret_cast<const uint8_t*>(in_view.data());
  auto* out = reinterpret_cast<uint8_t*>(out_chars);
  const std::size_t n_in = in_view.size();
  const std::size_t start = DeflateStart(in, n_in);
  const int n = ParallelInflateChunks(n_in, options);
  if (start == 0 || n < 2) return false;
  // Nominal chunk starts, in bits from in[0]; the deflate data end somewhere before the
  // last trailer (other members may follow: their chunks are wasted, never wrong).
  const std::size_t span = n_in - start - kTrailer;
  std::vector<uint64_t> nominal(static_cast<std::size_t>(n) + 1);
  for (int k = 0; k <= n; ++k) nominal[k] = (start + span / static_cast<std::size_t>(n) * k) * 8;
  nominal[n] = uint64_t{n_in} * 8;
  std::vector<Chunk> chunks(static_cast<std::size_t>(n), Chunk(options.buffers));
  std::size_t first_size = 0;
  bool first_ok = false;
  const std::size_t share = capacity / static_cast<std::size_t>(n);
  const std::size_t limit = std::min(capacity, 8 * share + (std::size_t{16} << 20));
  std::atomic<uint64_t> member_end{UINT64_MAX};  // set when chunk 0 ends the member
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  const int per_task = ChunksPerThread(options);
  ParallelFor(options.pool, options.max_threads, (n + per_task - 1) / per_task, [&](int, int t) {
    const int k0 = t * per_task, k1 = std::min(n, k0 + per_task);
    try {
      std::unique_ptr<ChunkJob> jobs[2];
      for (int k = k0; k < k1; ++k) {
        if (k == 0) {
          jobs[k - k0] = std::make_unique<FirstChunkJob>(in, n_in, uint64_t{start} * 8, nominal[1], out,
                                                         capacity, &chunks[0], &member_end, &first_ok,
                                                         &first_size);
        } else {
          const uint64_t stop = k + 1 < n ? nominal[k + 1] : UINT64_MAX;
          jobs[k - k0] = std::make_unique<LaterChunkJob>(in, n_in, nominal[k], nominal[k + 1], stop, limit,
                                                         share, member_end, &chunks[k]);
        }
      }
      RunJobs(jobs[0].get(), jobs[1].get());
    } catch (const std::bad_alloc&) {
      // Out of memory (a chunk's bookkeeping; its output's growth says kNoRoom instead): these
      // chunks are decoded sequentially, and without chunk 0 the caller uses libdeflate.
      for (int k = k0; k < k1; ++k) {
        if (k == 0) {
          first_ok = false;
        } else {
          chunks[k].ok = false;
        }
      }
    }
  });
  if (!first_ok) return false;
  const Clock::time_point t1 = Clock::now();
  // Chain the chunks in order; place each, and write its last window, whose bytes the
  // next chunk's markers (or a sequential stretch) need.
  struct Placed {
    int k;
    std::size_t off;
  };
  std::vector<Placed> placed;
  std::size_t pos = first_size;
  uint64_t bit = chunks[0].end_bit;
  bool final = chunks[0].final;
  int next = 1;
  std::size_t sequential = 0;
  BitReader seq(in, n_in);
  BlockDecoder dec;
  while (!final) {
    while (next < n && (!chunks[next].ok || (chunks[next].begin_bit < bit && !Chains(chunks[next], bit)))) ++next;
    if (next < n && Chains(chunks[next], bit)) {
      const Chunk& c = chunks[next];
      const std::size_t size = c.size();
      if (size > capacity - pos) return false;
      if (!WriteRange(c, out, pos, size - std::min(size, kWindow), size)) return false;
      placed.push_back({next, pos});
      pos += size;
      bit = c.end_bit;
      final = c.final;
      ++next;
      continue;
    }
    // No chunk starts here (a false guess before it, or none found): sequentially to the
    // next chunk's start, or to the end.
    seq.Seek(bit);
    InflateOutput<uint8_t> o;
    o.data = out;
    o.pos = pos;
    o.cap = capacity;
    ByteRun r{&seq, &dec, &o, next < n ? chunks[next].begin_bit : UINT64_MAX};
    DecodeBytesAlone(r);
    if (r.status != InflateStatus::kOk) return false;
    sequential += o.pos - pos;
    pos = o.pos;
    final = r.final;
    bit = seq.BitPos();
  }
  const Clock::time_point t2 = Clock::now();
  // The rest of every placed chunk, markers resolved against the windows written above.
  std::vector<char> written(placed.size(), 0);
  ParallelFor(options.pool, options.max_threads, static_cast<int>(placed.size()), [&](int, int i) {
    const Chunk& c = chunks[placed[i].k];
    written[i] = WriteRange(c, out, placed[i].off, 0, c.size() - std::min(c.size(), kWindow));
  });
  if (std::count(written.begin(), written.end(), 0) > 0) return false;
  const Clock::time_point t3 = Clock::now();
  // Trailer (RFC 1952 §2.3.1): CRC-32 of the output, in parallel pieces combined, and
  // ISIZE, the output size modulo 2^32.
  const std::size_t trailer = static_cast<std::size_t>((bit + 7) / 8);
  if (trailer + kTrailer > n_in) return false;
  const std::size_t piece = (pos + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
  std::vector<uint32_t> crcs(static_cast<std::size_t>(n), 0);
  ParallelFor(options.pool, options.max_threads, n, [&](int, int k) {
    const std::size_t a = std::min(pos, piece * static_cast<std::size_t>(k));
    crcs[k] = libdeflate_crc32(0, out + a, std::min(pos, a + piece) - a);
  });
  uLong crc = crcs[0];
  for (int k = 1; k < n; ++k) {
    const std::size_t a = std::min(pos, piece * static_cast<std::size_t>(k));
    crc = crc32_combine(crc, crcs[k], static_cast<z_off_t>(std::min(pos, a + piece) - a));
  }
  if (static_cast<uint32_t>(crc) != Le32(in + trailer) ||
      static_cast<uint32_t>(pos) != Le32(in + trailer + 4)) {
    return false;
  }
  const Clock::time_point t4 = Clock::now();
  *in_used = trailer + kTrailer;
  *out_used = pos;
  if (options.stats != nullptr) {
    auto s = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    *options.stats = {n, static_cast<int>(placed.size()), sequential, s(t0, t1), s(t1, t2), s(t2, t3), s(t3, t4)};
  }
  return true;
}

}  // namespace spexd::core::internal
