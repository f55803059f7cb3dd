// Inflating gzip-compressed FITS files (DESI's .fits.gz) with bounded memory. A stream
// whose ISIZE trailer is plausible (WholeInflateCapacity) is inflated in one call into a
// buffer of that size (libdeflate), then its headers are checked; any other stream (a
// likely gzip bomb, a lying ISIZE, more members than the last ISIZE holds, bad data) is
// inflated in steps, every HDU header checked against the limits as soon as it has been
// inflated, before any of its data is, so that a bomb is refused after a few kilobytes.
#ifndef SPEXD_CORE_FITS_GUNZIP_H_
#define SPEXD_CORE_FITS_GUNZIP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/task_pool.h"
#include "core/io/inflate_share.h"
#include "core/io/plane_buffer.h"

namespace spexd::core {

// What a FITS input may make a reader allocate, judged from its headers.
struct FitsSizeLimits {
  // The FITS file itself (after decompression).
  int64_t max_file_bytes = int64_t{1} << 30;
  // Any image HDU, plain or tile-compressed (ZNAXISn), as NAXIS1 x NAXIS2 x ...
  int64_t max_image_pixels = int64_t{1} << 28;
};

// Polled before and after a one-call inflation, or every few MB of output when inflating
// in steps; returning true stops with CANCELLED. May be empty.
using StopFn = std::function<bool()>;

// The output buffer, in bytes, that GunzipFits allocates to inflate `gz_bytes` of gzip data
// whose trailer states `isize` (GzipTrailerSize) in one call; 0 when it inflates in steps
// instead: `isize` under one FITS block (2880 bytes), over limits.max_file_bytes, or over
// 16 times `gz_bytes` (a bomb is refused from its headers without that allocation), or
// `gz_bytes` over limits.max_file_bytes.
int64_t WholeInflateCapacity(int64_t gz_bytes, uint32_t isize, const FitsSizeLimits& limits);

// An inflated FITS file: in a block of memory (the one-call inflation: reused from frame to
// frame when drawn from a pool, never zero-filled) or in a string (inflated in steps).
struct InflatedFits {
  PlaneBuffer<char> block;  // holds the file when not empty (size(): its bytes)
  std::string bytes;        // otherwise
  absl::string_view view() const {
    return block.empty() ? absl::string_view(bytes) : absl::string_view(block.data(), block.size());
  }
};

// The FITS file inside the gzip data `gz` (see IsGzip), the one-call inflation's output
// (and, for InflateFitsFd, the compressed bytes meanwhile) in blocks from `buffers` (null:
// blocks of its own). The one-call inflation of a large member runs on `pool` (its threads
// and the caller's) when given: a full frame's 64 MB member takes 0.5 s on one
// core of the GPU host. With `share`, the member takes its share of the pool among the
// members inflating at once (core/io/inflate_share.h); without, all of it. Errors as
// GunzipFits below.
absl::StatusOr<InflatedFits> InflateFits(absl::string_view gz, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop,
                                         PlaneBufferPool* buffers, TaskPool* pool = nullptr,
                                         InflateShare* share = nullptr);
absl::StatusOr<InflatedFits> InflateFitsFd(int fd, const std::string& name,
                                           const FitsSizeLimits& limits, const StopFn& stop,
                                           PlaneBufferPool* buffers, TaskPool* pool = nullptr,
                                           InflateShare* share = nullptr);

// The FITS file inside the gzip data `gz` (see IsGzip), as a string. Errors name `name`:
//  - RESOURCE_EXHAUSTED when an image HDU has more than limits.max_image_pixels
//    pixels, when the HDUs' declared sizes add up to more than limits.max_file_bytes,
//    or when the stream inflates to more than that (bytes after the last HDU are
//    inflated and counted, then dropped, as CFITSIO ignores them);
//  - INVALID_ARGUMENT for content that is not FITS (a first card other than SIMPLE, a
//    header without its mandatory cards) and for corrupt or truncated gzip data;
//  - CANCELLED when `stop` says so.
absl::StatusOr<std::string> GunzipFits(absl::string_view gz, const std::string& name,
                                       const FitsSizeLimits& limits, const StopFn& stop = {});

// The same, reading the gzip data from the open descriptor `fd` (from its current offset
// to its end): whole, when WholeInflateCapacity allows the one-call inflation (the file's
// size is then under limits.max_file_bytes), in 1 MiB pieces otherwise.
absl::StatusOr<std::string> GunzipFitsFd(int fd, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop = {});

// True when the file at `path` starts with the gzip magic bytes; false for a shorter
// or unreadable file (the FITS reader then reports the problem).
bool FileIsGzip(const std::string& path);

}  // namespace spexd::core

#endif  // SPEXD_CORE_FITS_GUNZIP_H_
