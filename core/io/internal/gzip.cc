#include "core/io/internal/gzip.h"

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <limits>
#include <new>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/parallel_for.h"

namespace spexd::core {
namespace {

// gzip framing for zlib's inflateInit2/deflateInit2 (zlib.h: windowBits + 16).
constexpr int kGzipWindowBits = 16 + MAX_WBITS;
constexpr std::size_t kOutPiece = 256 * 1024;
// zlib counts in uInt: feed at most this much per call.
constexpr std::size_t kMaxZlibChunk = 1u << 30;

}  // namespace

bool IsGzip(absl::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

uint32_t GzipTrailerSize(absl::string_view gz) {
  if (gz.size() < 4) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(gz.data() + gz.size() - 4);
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

namespace {

// What ISA-L's inflate error codes mean (igzip_lib.h), in zlib's words where it has them.
const char* IsalInflateError(int code) {
  switch (code) {
    case ISAL_INVALID_BLOCK: return "invalid block type or stored block length";
    case ISAL_INVALID_SYMBOL: return "invalid code";
    case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER: return "incorrect header";
    case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM: return "CRC-32 or length does not match the data";  // FHCRC: HeaderCrcWrong
    default: return "inflate error";
  }
}

// ISA-L level 1: on FITS frames of float data as small as zlib's level 6 and ~10x faster
// (docs/service.md "gzip in and out").
constexpr char kGzipHeader[10] = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3};

// The idle chunk buffers (GzipChunkRelease). Buffers are made in one size, enough for a
// kGzipChunkBytes chunk, so that any of them serves any chunk up to that size; a larger
// chunk (GzipCompress with larger chunks) gets a buffer of its own, freed with it.
constexpr std::size_t kChunkBufferBytes = kGzipChunkBytes + (kGzipChunkBytes >> 12) + 1024;

class ChunkBuffers {
 public:
  // A buffer of at least `bytes`, or null when out of memory.
  char* Take(std::size_t bytes, std::size_t* capacity) {
    if (bytes <= kChunkBufferBytes) {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        char* p = idle_.back();
        idle_.pop_back();
        *capacity = kChunkBufferBytes;
        return p;
      }
    }
    *capacity = std::max(bytes, kChunkBufferBytes);
    return new (std::nothrow) char[*capacity];
  }
  void Give(char* p, std::size_t capacity) noexcept {
    if (capacity == kChunkBufferBytes) {
      absl::MutexLock lock(&mu_);
      if ((idle_.size() + 1) * kChunkBufferBytes <= kIdleGzipChunkBytes && idle_.size() < idle_.capacity()) {
        idle_.push_back(p);
        return;
      }
    }
    delete[] p;
  }
  ChunkBuffers() { idle_.reserve(kIdleGzipChunkBytes / kChunkBufferBytes); }

 private:
  absl::Mutex mu_;
  std::vector<char*> idle_ ABSL_GUARDED_BY(mu_);  // reserved: pushing never allocates
};

// Never destroyed: chunks may be released during static destruction.
ChunkBuffers& IdleChunkBuffers() {
  static ChunkBuffers* const buffers = new ChunkBuffers;
  return *buffers;
}

bool DeflateInto(const char* data, std::size_t n, bool last, GzipChunk* chunk) {
  // ISA-L's level-1 work area, one per thread: the pool's threads compress chunk after chunk.
  thread_local std::vector<uint8_t> level_buf;
  // Stored blocks at worst: 5 bytes a 64 KiB block, and the final block.
  const std::size_t bound = n + (n >> 12) + 1024;
  try {
    if (level_buf.size() < ISAL_DEF_LVL1_DEFAULT) level_buf.resize(ISAL_DEF_LVL1_DEFAULT);
  } catch (const std::bad_alloc&) {
    return false;
  }
  std::size_t capacity = 0;
  char* out = IdleChunkBuffers().Take(bound, &capacity);
  if (out == nullptr) return false;
  chunk->bytes = std::unique_ptr<char[], GzipChunkRelease>(out, GzipChunkRelease{capacity});
  isal_zstream zs{};
  isal_deflate_stateless_init(&zs);
  zs.level = 1;
  zs.level_buf = level_buf.data();
  zs.level_buf_size = static_cast<uint32_t>(level_buf.size());
  zs.gzip_flag = IGZIP_DEFLATE;
  // Every chunk but the last ends byte-aligned, with no reference into the next one's data
  // (a full flush's empty stored block), so the chunks are concatenated as they are.
  zs.end_of_stream = last ? 1 : 0;
  zs.flush = last ? NO_FLUSH : FULL_FLUSH;
  zs.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(data));
  zs.avail_in = static_cast<uint32_t>(n);
  zs.next_out = reinterpret_cast<uint8_t*>(chunk->bytes.get());
  zs.avail_out = static_cast<uint32_t>(bound);
  if (isal_deflate_stateless(&zs) != COMP_OK || zs.avail_in != 0) return false;
  chunk->size = zs.total_out;
  chunk->input = n;
  chunk->crc = crc32_gzip_refl(0, reinterpret_cast<const unsigned char*>(data), n);
  return true;
}

void PutLe32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

void GzipChunkRelease::operator()(char* p) const noexcept { IdleChunkBuffers().Give(p, capacity); }

absl::StatusOr<GzipChunk> DeflateGzipChunk(absl::string_view data, bool last) {
  // ISA-L counts in uint32: a chunk is at most 1 GiB.
  if (data.size() > (std::size_t{1} << 30)) {
    return absl::InvalidArgumentError("gzip: chunk over 1 GiB");
  }
  GzipChunk chunk;
  if (!DeflateInto(data.data(), data.size(), last, &chunk)) {
    return absl::ResourceExhaustedError("gzip: deflate failed (out of memory)");
  }
  return chunk;
}

GzipMemberEnds MemberEndsOf(const std::vector<const GzipChunk*>& chunks) {
  GzipMemberEnds ends;
  std::copy(kGzipHeader, kGzipHeader + sizeof(kGzipHeader), ends.header);
  uint32_t crc = 0;
  uint64_t n = 0;
  bool first = true;
  for (const GzipChunk* c : chunks) {
    crc = first ? c->crc
                : static_cast<uint32_t>(crc32_combine(crc, c->crc, static_cast<z_off_t>(c->input)));
    first = false;
    n += c->input;
  }
  PutLe32(crc, ends.trailer);
  PutLe32(static_cast<uint32_t>(n & 0xffffffffu), ends.trailer + 4);
  return ends;
}

absl::StatusOr<std::string> GzipCompress(absl::string_view data, TaskPool* pool, int max_workers,
                                         std::size_t chunk_bytes) {
  chunk_bytes = std::clamp<std::size_t>(chunk_bytes, 1, std::size_t{1} << 30);
  const std::size_t n = data.size();
  const std::size_t nchunks = std::max<std::size_t>(1, (n + chunk_bytes - 1) / chunk_bytes);
  if (nchunks > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError("gzip: input too large");
  }
  const int workers = static_cast<int>(
      std::min<std::size_t>(nchunks, static_cast<std::size_t>(std::max(1, max_workers))));
  std::vector<GzipChunk> chunks(nchunks);
  std::vector<char> ok(nchunks, 0);
  ParallelFor(pool, workers, static_cast<int>(nchunks), [&](int, int i) {
    const std::size_t begin = std::min(n, static_cast<std::size_t>(i) * chunk_bytes);
    const std::size_t len = std::min(chunk_bytes, n - begin);
    ok[static_cast<std::size_t>(i)] =
        DeflateInto(data.data() + begin, len, static_cast<std::size_t>(i) + 1 == nchunks,
                    &chunks[static_cast<std::size_t>(i)]);
  });
  // Header (RFC 1952 §2.3: deflate, no flags, no time, Unix), the chunks, CRC-32 and ISIZE.
  std::vector<const GzipChunk*> order(nchunks);
  std::vector<std::size_t> at(nchunks);
  std::size_t total = sizeof(kGzipHeader);
  for (std::size_t i = 0; i < nchunks; ++i) {
    if (ok[i] == 0) return absl::ResourceExhaustedError("gzip: deflate failed (out of memory)");
    order[i] = &chunks[i];
    at[i] = total;
    total += chunks[i].size;
  }
  const GzipMemberEnds ends = MemberEndsOf(order);
  std::string out;
  try {
    out.resize(total + sizeof(ends.trailer));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("gzip: out of memory for the compressed bytes");
  }
  std::copy(ends.header, ends.header + sizeof(ends.header), out.data());
  ParallelFor(pool, workers, static_cast<int>(nchunks), [&](int, int i) {
    const GzipChunk& c = chunks[static_cast<std::size_t>(i)];
    std::copy(c.bytes.get(), c.bytes.get() + c.size, out.data() + at[static_cast<std::size_t>(i)]);
  });
  std::copy(ends.trailer, ends.trailer + sizeof(ends.trailer), out.data() + total);
  return out;
}

namespace {
// Bytes after a member that do not open another one: gzip -d ignores them with a warning,
// Python's gzip (astropy's reader) refuses the file; so does this, by what they are.
constexpr absl::string_view kNotAMember = "data after the gzip stream that is not a gzip member";

// Whether `next` (the bytes after a complete member, as many as are at hand) can begin
// another member: the magic 1f 8b, or its first byte while the second has not come.
bool MayStartMember(absl::string_view next) {
  if (next.empty()) return true;
  if (static_cast<unsigned char>(next[0]) != 0x1f) return false;
  return next.size() < 2 || static_cast<unsigned char>(next[1]) == 0x8b;
}

// The start of a member kept to tell a wrong header CRC from a wrong data CRC, which
// ISA-L reports alike: a header (RFC 1952 §2.3.1) with a name or comment longer than this
// is judged by ISA-L's word alone.
constexpr std::size_t kMemberHeadKept = std::size_t{64} << 10;

// Whether `head` (the start of a member) holds a whole header with FHCRC set whose CRC-16
// (the low 16 bits of the CRC-32 of the header's bytes before it) is not the stored one.
bool HeaderCrcWrong(absl::string_view head) {
  if (head.size() < 10) return false;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(head[i]); };
  const unsigned flags = byte(3);
  if ((flags & 0x02) == 0) return false;  // no FHCRC
  std::size_t at = 10;
  if ((flags & 0x04) != 0) {  // FEXTRA: XLEN, then XLEN bytes
    if (head.size() < at + 2) return false;
    at += 2 + (byte(at) | (std::size_t{byte(at + 1)} << 8));
  }
  for (unsigned flag : {0x08u, 0x10u}) {  // FNAME, FCOMMENT: zero-terminated
    if ((flags & flag) == 0) continue;
    const std::size_t nul = at < head.size() ? head.find('\0', at) : absl::string_view::npos;
    if (nul == absl::string_view::npos) return false;
    at = nul + 1;
  }
  if (head.size() < at + 2) return false;
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(head.data()), static_cast<uInt>(at));
  return (crc & 0xFFFFu) != (byte(at) | (unsigned{byte(at + 1)} << 8));
}
}  // namespace

struct GzipDecoder::State {
  inflate_state st;
  bool in_member = false;  // inside a member whose end has not been seen
  bool second_magic = false;  // a later member began with 1f alone: 8b must follow
  int members = 0;         // complete members
  bool padding = false;    // NUL bytes seen after the last member
  std::string head;        // the current member's first bytes (HeaderCrcWrong)
  absl::Status error;      // sticky
};

GzipDecoder::GzipDecoder(std::string name) : name_(std::move(name)), state_(std::make_unique<State>()) {}
GzipDecoder::~GzipDecoder() = default;

int GzipDecoder::members() const { return state_->members; }

absl::Status GzipDecoder::Fail(absl::string_view what) {
  state_->error = absl::InvalidArgumentError(absl::StrCat(name_, ": ", what));
  return state_->error;
}

absl::StatusOr<std::size_t> GzipDecoder::Decode(absl::string_view* input, char* out, std::size_t room) {
  State& s = *state_;
  if (!s.error.ok()) return s.error;
  std::size_t budget = std::min(input->size(), kMaxStepInput);
  std::size_t written = 0;
  while (budget > 0 && written < room) {
    if (!s.in_member) {
      if (s.members > 0) {  // NUL padding after the stream
        const std::size_t nul = input->substr(0, budget).find_first_not_of('\0');
        const std::size_t skip = nul == absl::string_view::npos ? budget : nul;
        if (skip > 0) s.padding = true;
        input->remove_prefix(skip);
        budget -= skip;
        if (budget == 0) break;
        if (s.padding) return Fail("data after the gzip stream and its padding");
        if (!MayStartMember(input->substr(0, budget))) return Fail(kNotAMember);
        s.second_magic = budget == 1;
      }
      isal_inflate_init(&s.st);
      s.st.crc_flag = ISAL_GZIP;
      s.in_member = true;
      s.head.clear();
    } else if (s.second_magic) {
      if (static_cast<unsigned char>((*input)[0]) != 0x8b) return Fail(kNotAMember);
      s.second_magic = false;
    }
    const std::size_t out_now = std::min<std::size_t>(room - written, std::numeric_limits<uint32_t>::max());
    s.st.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(input->data()));
    s.st.avail_in = static_cast<uint32_t>(budget);
    s.st.next_out = reinterpret_cast<uint8_t*>(out + written);
    s.st.avail_out = static_cast<uint32_t>(out_now);
    const int ret = isal_inflate(&s.st);
    // Checked before its counts are used: on some errors ISA-L (2.30) hands back more input
    // than it was given (avail_in past `budget`, even wrapped round), and a count taken from
    // it would move `input` before its start.
    if (ret == ISAL_INCORRECT_CHECKSUM && s.head.size() < kMemberHeadKept &&
        HeaderCrcWrong(s.head + std::string(input->substr(0, std::min(budget, kMemberHeadKept))))) {
      return Fail("corrupt gzip data (the header's CRC-16, FHCRC, does not match the header)");
    }
    if (ret < 0) return Fail(absl::StrCat("corrupt gzip data (", IsalInflateError(ret), ")"));
    if (s.st.avail_in > budget || s.st.avail_out > out_now) {
      return Fail("corrupt gzip data (the inflater lost its place)");
    }
    const std::size_t used = budget - s.st.avail_in, produced = out_now - s.st.avail_out;
    if (s.head.size() < kMemberHeadKept) {
      s.head.append(input->data(), std::min(used, kMemberHeadKept - s.head.size()));
    }
    // The lone 1f left unread would come back first: ISA-L's own header check judges it.
    if (used == 0) s.second_magic = false;
    input->remove_prefix(used);
    budget -= used;
    written += produced;
    if (s.st.block_state == ISAL_BLOCK_FINISH) {
      s.in_member = false;
      ++s.members;
      continue;
    }
    if (used == 0 && produced == 0) break;  // needs more input than this step has
  }
  return written;
}

absl::Status GzipDecoder::Finish() {
  State& s = *state_;
  if (!s.error.ok()) return s.error;
  if (s.in_member || s.members == 0) {
    return Fail("truncated gzip data (the stream ends before its end-of-stream marker)");
  }
  return absl::OkStatus();
}

struct GzipInflater::State {
  z_stream zs{};
  bool initialised = false;
  bool in_member = false;  // inside a member whose end has not been seen
  int members = 0;         // complete members
  bool padding = false;    // NUL bytes seen after the last member
  absl::Status error;      // sticky
  std::string out = std::string(kOutPiece, '\0');
};

GzipInflater::GzipInflater(std::string name, Sink sink)
    : name_(std::move(name)), sink_(std::move(sink)), state_(std::make_unique<State>()) {
  state_->initialised = inflateInit2(&state_->zs, kGzipWindowBits) == Z_OK;
}

GzipInflater::~GzipInflater() {
  if (state_->initialised) inflateEnd(&state_->zs);
}

absl::Status GzipInflater::Fail(absl::string_view what) {
  state_->error = absl::InvalidArgumentError(absl::StrCat(name_, ": ", what));
  return state_->error;
}

absl::Status GzipInflater::Feed(absl::string_view input) {
  State& s = *state_;
  if (!s.error.ok()) return s.error;
  if (!s.initialised) {
    s.error = absl::ResourceExhaustedError(absl::StrCat(name_, ": cannot initialise zlib"));
    return s.error;
  }
  z_stream& zs = s.zs;
  while (!input.empty()) {
    const std::size_t in_now = std::min(kMaxZlibChunk, input.size());
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    zs.avail_in = static_cast<uInt>(in_now);
    for (;;) {
      if (!s.in_member) {
        if (zs.avail_in == 0) break;
        if (s.members > 0 && *zs.next_in == 0) {  // NUL padding after the stream
          ++zs.next_in;
          --zs.avail_in;
          s.padding = true;
          continue;
        }
        if (s.padding) return Fail("data after the gzip stream and its padding");
        if (s.members > 0) {  // another member follows
          if (!MayStartMember(absl::string_view(reinterpret_cast<const char*>(zs.next_in),
                                                std::min<std::size_t>(zs.avail_in, 2)))) {
            return Fail(kNotAMember);
          }
          inflateReset(&zs);
        }
        s.in_member = true;
      }
      zs.next_out = reinterpret_cast<Bytef*>(s.out.data());
      zs.avail_out = static_cast<uInt>(s.out.size());
      const int ret = inflate(&zs, Z_NO_FLUSH);
      if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) {
        return Fail(absl::StrCat("corrupt gzip data (",
                                 zs.msg != nullptr ? zs.msg : "zlib error", ")"));
      }
      const std::size_t produced = s.out.size() - zs.avail_out;
      if (produced > 0) {
        absl::Status sunk = sink_(absl::string_view(s.out.data(), produced));
        if (!sunk.ok()) {
          s.error = sunk;
          return sunk;
        }
      }
      if (ret == Z_STREAM_END) {
        s.in_member = false;
        ++s.members;
        continue;
      }
      // Z_BUF_ERROR: no progress possible without more input. Z_OK with output room
      // left: the input is used up.
      if (ret == Z_BUF_ERROR || (zs.avail_in == 0 && zs.avail_out != 0)) break;
    }
    input.remove_prefix(in_now - zs.avail_in);
    if (zs.avail_in != 0) return Fail("corrupt gzip data (inflate stalled)");
  }
  return absl::OkStatus();
}

absl::Status GzipInflater::Finish() {
  State& s = *state_;
  if (!s.error.ok()) return s.error;
  if (s.in_member || s.members == 0) {
    return Fail("truncated gzip data (the stream ends before its end-of-stream marker)");
  }
  return absl::OkStatus();
}

}  // namespace spexd::core
