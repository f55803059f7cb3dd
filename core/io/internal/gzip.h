// gzip (RFC 1952): recognising and compressing (zlib); inflating in steps (zlib), so that
// a caller can bound and check what a small input inflates to as it goes; and inflating a
// whole stream into a buffer sized up front (libdeflate: 1.5-2x zlib's speed on float
// data, docs/performance.md "Host decode").
#ifndef SPEXD_CORE_GZIP_H_
#define SPEXD_CORE_GZIP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/io/internal/parallel_inflate.h"

namespace spexd::core {

// True when `bytes` start with the gzip magic bytes 1f 8b (the name does not matter:
// DESI's .fits.gz files, or a renamed one, are recognised by content).
bool IsGzip(absl::string_view bytes);

// The gzip encoding of `data` (one member, zlib's default level 6: float data compresses
// little more at 9 and takes several times longer).
absl::StatusOr<std::string> GzipCompress(absl::string_view data);

// Inflates a gzip stream given in pieces, handing the output to `sink` in pieces of at
// most 256 KiB. Accepts several concatenated members (as gzip -d does) and trailing NUL
// padding. INVALID_ARGUMENT names `name` for corrupt data ("corrupt gzip data") and for a
// stream that ends early (Finish: "truncated gzip data"). A sink error stops inflation
// and is returned as is.
// The ISIZE field that ends `gz` (its last 4 bytes, little-endian): the output size,
// modulo 2^32, of the last member (RFC 1952 §2.3.1); 0 when `gz` has fewer than 4 bytes.
// Only a claim: a file may state anything there, and padding or another member changes it.
uint32_t GzipTrailerSize(absl::string_view gz);

// Inflates the whole gzip stream `gz` (one or more members, then optional NUL padding,
// as GzipInflater accepts) into out[0, capacity) with libdeflate, one call per member;
// nothing is written beyond `capacity`. Returns the bytes written. `stop`, when set, is
// polled before each member: true gives CANCELLED. Errors name `name`:
//  - OUT_OF_RANGE when the output does not fit in `capacity` bytes;
//  - INVALID_ARGUMENT for corrupt or truncated data, a CRC-32 or ISIZE that does not match
//    the data, and data after the stream (libdeflate does not tell these apart: the
//    streaming GzipInflater does, for a precise message).
// A member large enough for `parallel` (ParallelInflateChunks >= 2) is first inflated on
// several threads (internal/parallel_inflate.h); when that fails for any reason the
// member is inflated again with libdeflate, whose result or error is returned: the
// statuses and messages are the same with or without `parallel`.
absl::StatusOr<std::size_t> InflateGzipInto(absl::string_view gz, char* out,
                                            std::size_t capacity, absl::string_view name,
                                            const std::function<bool()>& stop = {},
                                            const internal::ParallelInflateOptions& parallel = {});

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
