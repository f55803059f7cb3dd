// Inflating gzip-compressed FITS files (DESI's .fits.gz) with bounded time and memory: one
// sequential ISA-L decode per file (a host pool runs several frames at once; one core
// inflates a full frame in ~0.35 s, docs/service.md "gzip in and out"), in steps of at most 4 MiB of
// output and of input, straight into the block the FITS file is read from. Between steps
// every HDU header is checked against the limits, and against what the reader needs of
// its HDU, as soon as it has been inflated, before any of its data is (a gzip bomb, or a
// stream that is not FITS, is refused after its first 64 KiB; a header without END after
// its first 230 KB); the output is capped by what the headers declare and the limits
// allow, and `stop` (cancellation, deadline, drain) is polled.
#ifndef SPEXD_CORE_FITS_GUNZIP_H_
#define SPEXD_CORE_FITS_GUNZIP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/io/plane_buffer.h"

namespace spexd::core {

// What a FITS input may make a reader allocate, judged from its headers.
struct FitsSizeLimits {
  // The FITS file itself (after decompression).
  int64_t max_file_bytes = int64_t{1} << 30;
  // Any image HDU, plain or tile-compressed (ZNAXISn), as NAXIS1 x NAXIS2 x ...
  int64_t max_image_pixels = int64_t{1} << 28;
};

// What the header check knows of an HDU once its END card has been inflated, before any
// of its data is.
struct HduHeaderFacts {
  int index = 0;                 // 0: the primary HDU
  std::string extname, hduname;  // "" when absent
  // Whether CFITSIO reads its data as an image (the primary array, an IMAGE extension, a
  // tile-compressed image), and its axes, NAXIS1 (ZNAXIS1) first.
  bool image = false;
  std::vector<int64_t> axes;
  bool table = false;  // a table to CFITSIO (a tile-compressed image included)
  int64_t data_bytes = 0;
  // Whether CFITSIO's fits_movnam_hdu (any type, any version) stops at this HDU for
  // `name`: its EXTNAME or its HDUNAME is `name`, case ignored.
  bool Named(absl::string_view name) const;
};
// A reader's judgement of an HDU from its header: kept, or dropped (an extension the
// reader never moves to: its data are inflated, counted and not held, and the FITS file
// given back lacks it; meant for images, whose data the walk before CFITSIO does not
// read, so that the file is judged as its plain twin), or the error to refuse the file
// with (its message is prefixed with the file and HDU). May be empty: every HDU kept.
enum class HduUse { kKeep, kDrop };
using HduHeaderCheck = std::function<absl::StatusOr<HduUse>(const HduHeaderFacts&)>;

// Polled between the inflation's steps (each at most 4 MiB of output and of input);
// returning true stops with CANCELLED. May be empty.
using StopFn = std::function<bool()>;

// The output block, in bytes, that InflateFits takes first for `gz_bytes` of gzip data
// whose trailer states `isize` (GzipTrailerSize): `isize` when it is plausible, 0 when the
// block is sized from the compressed bytes instead and grown as the output needs (`isize`
// under one FITS block, over limits.max_file_bytes, or over 16 times `gz_bytes`). Either
// way the block is taken only once the primary header has been inflated and checked
// (until then the output goes to a buffer of at most the longest header allowed).
int64_t WholeInflateCapacity(int64_t gz_bytes, uint32_t isize, const FitsSizeLimits& limits);

// An inflated FITS file: in a block of memory (reused from frame to frame when drawn from a
// pool, never zero-filled) or in a string.
struct InflatedFits {
  PlaneBuffer<char> block;  // holds the file when not empty (size(): its bytes)
  std::string bytes;        // otherwise
  absl::string_view view() const {
    return block.empty() ? absl::string_view(bytes) : absl::string_view(block.data(), block.size());
  }
};

// Where an inflation's memory comes from (a null pool: memory of its own): `file`, the
// block the FITS file is inflated into (InflatedFits::block); `work`, what it needs only
// while it runs (the compressed pieces read from a descriptor, the output before the
// primary header has passed, a dropped HDU's data), reused from load to load so that none
// of it is faulted in or zeroed again. Made from one pool, it serves both.
struct InflateBuffers {
  InflateBuffers(PlaneBufferPool* pool = nullptr)  // NOLINT(google-explicit-constructor)
      : file(pool), work(pool) {}
  InflateBuffers(PlaneBufferPool* file_pool, PlaneBufferPool* work_pool)
      : file(file_pool), work(work_pool) {}
  PlaneBufferPool* file = nullptr;
  PlaneBufferPool* work = nullptr;
};

// The FITS file inside the gzip data `gz` (see IsGzip), inflated into a block from
// `buffers`; InflateFitsFd reads the gzip data from `fd` (from its current
// offset) in 4 MiB pieces as it inflates them. `hdu_check` (may be empty) judges each HDU
// from its header before its data inflate. Errors as GunzipFits below, and hdu_check's.
absl::StatusOr<InflatedFits> InflateFits(absl::string_view gz, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop,
                                         const InflateBuffers& buffers,
                                         const HduHeaderCheck& hdu_check = {});
absl::StatusOr<InflatedFits> InflateFitsFd(int fd, const std::string& name,
                                           const FitsSizeLimits& limits, const StopFn& stop,
                                           const InflateBuffers& buffers,
                                           const HduHeaderCheck& hdu_check = {});

// The FITS file inside the gzip data `gz` (see IsGzip), as a string. Errors name `name`:
//  - RESOURCE_EXHAUSTED when an image HDU has more than limits.max_image_pixels
//    pixels, when the HDUs' declared sizes add up to more than limits.max_file_bytes,
//    or when the stream inflates to more than that (bytes after the last HDU are
//    inflated and counted, then dropped, as CFITSIO ignores them);
//  - INVALID_ARGUMENT for content that is not FITS (a first card other than SIMPLE, a
//    header without its mandatory cards, one without END in its first 2880 cards, a card
//    the walk before CFITSIO refuses: core/io/internal/fits_header.h) and for corrupt or
//    truncated gzip data;
//  - CANCELLED when `stop` says so.
absl::StatusOr<std::string> GunzipFits(absl::string_view gz, const std::string& name,
                                       const FitsSizeLimits& limits, const StopFn& stop = {});

// The same, reading the gzip data from the open descriptor `fd` (from its current offset
// to its end) in pieces as it inflates them.
absl::StatusOr<std::string> GunzipFitsFd(int fd, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop = {});

// True when the file at `path` starts with the gzip magic bytes; false for a shorter
// or unreadable file (the FITS reader then reports the problem).
bool FileIsGzip(const std::string& path);

}  // namespace spexd::core

#endif  // SPEXD_CORE_FITS_GUNZIP_H_
