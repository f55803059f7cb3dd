// gzip (RFC 1952) through zlib: recognising, compressing, and inflating in steps, so
// that a caller can bound and check what a small input inflates to as it goes.
#ifndef SPEXD_CORE_GZIP_H_
#define SPEXD_CORE_GZIP_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

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
