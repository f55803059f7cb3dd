// The service's limits (flags in main.cc), on their own so that both the job
// (extract_job.h) and the message conversions (proto_convert.h, which extract_job.h
// includes) can use them without including each other.
#ifndef SPEXD_SERVER_SERVICE_LIMITS_H_
#define SPEXD_SERVER_SERVICE_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "core/io/fits_gunzip.h"

namespace spexd::server {

struct ServiceLimits {
  int64_t max_message_bytes = 4 << 20;   // no message larger than this, either way
  int64_t max_upload_bytes = 1LL << 30;  // image upload or server-side image file
  int64_t max_image_pixels = 1LL << 26;
  // Host memory one request may need by core::EstimateMemory (plan, spots, results,
  // model, solver workspace); a normal DESI frame needs about 0.7 GB.
  int64_t max_request_bytes = 8LL << 30;
  int solver_threads = 1;  // patches solved at once by a worker (for the estimate)
  // A client that stalls is cut off (CallWatchdog): no upload data for this long, or a
  // response write not completing (the client does not read) for this long. 0: never.
  double upload_idle_seconds = 30;
  double write_timeout_seconds = 60;
  // An upload must keep up this rate, averaged over spans of at least
  // upload_rate_window_seconds (UploadRateFloor): a trickle that resets the idle timer
  // with a byte now and then cannot hold an upload slot. A 100 Mbit/s
  // link sends 12 MB/s; 0 disables the floor.
  double upload_min_bytes_per_second = 256 * 1024;
  double upload_rate_window_seconds = 20;
  // Connections (gRPC channel arguments): a TCP connection must finish its handshake (TLS,
  // the HTTP/2 preface) within handshake_timeout_seconds, and one with no call open for
  // connection_idle_seconds is closed (GOAWAY; a client reconnects on its next call), so
  // silent sockets cannot hold descriptors (gRPC's defaults: 120 s and never). A connection
  // with a call open is pinged after keepalive_seconds without traffic and dropped when
  // the ping is not answered within 20 s (a peer that vanished).
  double handshake_timeout_seconds = 10;
  double connection_idle_seconds = 60;
  double keepalive_seconds = 60;
};

// Array payload one response message may carry under the server's message limit: the
// limit less room for everything but the payload arrays (tags, lengths, counts).
inline std::size_t MaxPayloadBytes(const ServiceLimits& limits) {
  constexpr std::size_t kMessageOverhead = 64 * 1024;
  return static_cast<std::size_t>(limits.max_message_bytes) - kMessageOverhead;
}

// What an input FITS file may make the server allocate: a decompressed file (gzip
// inputs) no larger than an upload may be, and no image over --max_image_pixels.
inline core::FitsSizeLimits FitsLimits(const ServiceLimits& limits) {
  return core::FitsSizeLimits{limits.max_upload_bytes, limits.max_image_pixels};
}

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SERVICE_LIMITS_H_
