// gzip (RFC 1952): recognising; compressing one member on several threads (ISA-L, in
// independent chunks); inflating in steps with ISA-L (GzipDecoder: straight into the
// caller's memory, so that the caller bounds and checks the output as it grows) or zlib
// (GzipInflater: in pieces handed to a sink). docs/service.md "gzip in and out" has the measurements
// behind the choice of libraries and level.
#ifndef SPEXD_CORE_GZIP_H_
#define SPEXD_CORE_GZIP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/task_pool.h"

namespace spexd::core {

// True when `bytes` start with the gzip magic bytes 1f 8b (the name does not matter:
// DESI's .fits.gz files, or a renamed one, are recognised by content).
bool IsGzip(absl::string_view bytes);

// The gzip encoding of `data`: one standard member whose deflate data is the ISA-L level-1
// compression of `data` in independent chunks of `chunk_bytes` (each ended by a full
// flush, the last one final), compressed on up to `max_workers` threads of `pool` (the
// caller included; null or max_workers <= 1: on the caller alone). Its CRC-32 combines
// the chunks'. Any gzip reader inflates it to `data`. The compressed bytes may differ from
// call to call (ISA-L's match choices vary slightly; the sizes by a few bytes in 3 KB), so
// a .gz file is compared inflated. 1 MiB chunks compress a frame as small as the whole at
// once (docs/service.md "gzip in and out").
inline constexpr std::size_t kGzipChunkBytes = std::size_t{1} << 20;
absl::StatusOr<std::string> GzipCompress(absl::string_view data, TaskPool* pool = nullptr,
                                         int max_workers = 1,
                                         std::size_t chunk_bytes = kGzipChunkBytes);

// One piece of a gzip member, compressed on its own (any thread, any order) and joined
// with the others by GzipMemberEnds: the raw deflate data of `input` bytes at ISA-L level 1,
// ending byte-aligned with no reference past itself (a full flush), or, for the member's
// last piece (`last`), with the final block.
// A chunk's output memory goes back, when the chunk goes, to a process-wide store of idle
// chunk buffers (at most kIdleGzipChunkBytes) that the next chunks are deflated into: a
// frame file is ~70 chunks of ~1 MiB, and memory freshly allocated for each frame was mapped
// and faulted in page by page (glibc gives a whole arena heap back once all of it is free),
// ~8000 page faults a server-written .fits.gz frame.
inline constexpr std::size_t kIdleGzipChunkBytes = std::size_t{192} << 20;
struct GzipChunkRelease {
  std::size_t capacity = 0;  // bytes of the buffer
  void operator()(char* p) const noexcept;
};
struct GzipChunk {
  std::unique_ptr<char[], GzipChunkRelease> bytes;
  std::size_t size = 0;   // compressed bytes
  std::size_t input = 0;  // bytes it inflates to
  uint32_t crc = 0;       // CRC-32 of those bytes
  absl::string_view view() const { return {bytes.get(), size}; }
};
absl::StatusOr<GzipChunk> DeflateGzipChunk(absl::string_view data, bool last);

// The 10-byte header and the 8-byte trailer (CRC-32, ISIZE) of the member made of
// `chunks` in order, the last one compressed with `last`: header, chunks, trailer is the
// member.
struct GzipMemberEnds {
  char header[10];
  char trailer[8];
};
GzipMemberEnds MemberEndsOf(const std::vector<const GzipChunk*>& chunks);

// The ISIZE field that ends `gz` (its last 4 bytes, little-endian): the output size,
// modulo 2^32, of the last member (RFC 1952 §2.3.1); 0 when `gz` has fewer than 4 bytes.
// Only a claim: a file may state anything there, and padding or another member changes it.
uint32_t GzipTrailerSize(absl::string_view gz);

// Inflates a gzip stream (ISA-L) in steps whose size the caller chooses: each Decode call
// takes what it can of `*input` and writes at most `room` bytes to `out`, so the caller
// decides how much output it allows, where it goes and when to look at it (its checks,
// cancellation, deadlines) between calls. Accepts several concatenated members and NUL
// padding after the last (as gzip -d does); checks each member's CRC-32 and ISIZE. Errors
// are INVALID_ARGUMENT naming `name`: "corrupt gzip data (...)", "data after the gzip
// stream and its padding", "data after the gzip stream that is not a gzip member" (bytes
// without the gzip magic where a member could start), and from Finish "truncated gzip
// data ...".
class GzipDecoder {
 public:
  explicit GzipDecoder(std::string name);
  ~GzipDecoder();
  GzipDecoder(const GzipDecoder&) = delete;
  GzipDecoder& operator=(const GzipDecoder&) = delete;

  // Consumes a prefix of `*input` (advancing it) and returns the bytes written to
  // out[0, room). Returns 0 with input left only when `room` is 0. At most kMaxStepInput
  // input bytes are taken per call, so a call's time is bounded even when the input
  // inflates to nothing.
  static constexpr std::size_t kMaxStepInput = std::size_t{4} << 20;
  absl::StatusOr<std::size_t> Decode(absl::string_view* input, char* out, std::size_t room);
  // After the last input: INVALID_ARGUMENT when the stream is incomplete (or empty).
  absl::Status Finish();
  // Complete members so far.
  int members() const;

 private:
  struct State;
  absl::Status Fail(absl::string_view what);
  std::string name_;
  std::unique_ptr<State> state_;
};

// Inflates a gzip stream given in pieces (zlib), handing the output to `sink` in pieces of
// at most 256 KiB. Accepts several concatenated members (as gzip -d does) and trailing NUL
// padding. INVALID_ARGUMENT names `name` for corrupt data ("corrupt gzip data"), for bytes
// after a member that cannot start another ("... not a gzip member") and for a stream that
// ends early (Finish: "truncated gzip data"). A sink error stops inflation and is returned
// as is.
class GzipInflater {
 public:
  using Sink = std::function<absl::Status(absl::string_view piece)>;
  GzipInflater(std::string name, Sink sink);
  ~GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  absl::Status Feed(absl::string_view input);
  // Call after the last Feed: INVALID_ARGUMENT when the stream is incomplete.
  absl::Status Finish();

 private:
  struct State;
  absl::Status Fail(absl::string_view what);
  std::string name_;
  Sink sink_;
  std::unique_ptr<State> state_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_GZIP_H_
