// Writes an extracted frame in the desispec layout (extraction-spec §5.3), atomically.
#ifndef SPEXD_CORE_FRAME_WRITER_H_
#define SPEXD_CORE_FRAME_WRITER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/task_pool.h"
#include "core/frame/frame.h"
#include "core/io/plane_buffer.h"
#include "core/plan/extraction_params.h"

namespace spexd::core {

// One column of the SCORES HDU.
struct FrameScore {
  std::string name;     // e.g. SUM_RAW_COUNT_R
  std::string comment;  // desispec's TTYPE comment
  std::vector<double> values;  // [nspec]
};

struct FrameMetadata {
  std::vector<std::string> image_header;  // IMAGE header cards of the input
  std::string fibermap_fits;              // FIBERMAP as FITS bytes (may be empty)
  std::string in_psf;                     // IN_PSF value (input PSF path)
  std::string in_img;                     // IN_IMG value (input image path)
  std::string orig_psf;                   // ORIG_PSF (the PSF's own IN_PSF), optional
  double wmin = 0, wmax = 0, dw = 0;      // requested grid (WAVEMIN, WAVEMAX, WAVESTEP)
  double heliocor = 1.0;                  // HELIOCOR, written when != 1 (--barycentric-correction)
  bool scores = true;                     // SCORES HDU (desi_extract_spectra --no-scores: false)
  // Scores computed from the float64 values when the frame holds rounded ones (a float32
  // stream): written instead of RawScores(frame) (empty: no SCORES HDU).
  std::optional<std::vector<FrameScore>> given_scores;
};

// Wall seconds of a FrameToFits / ModelToFits call's phases (spexd_frame_write_bench).
struct FitsWriteTimes {
  double scores = 0;     // RAW scores (FrameToFits)
  double headers = 0;    // every HDU's header, and the small HDUs, in scratch files
  double allocate = 0;   // the output's pages faulted in and zero-filled
  double encode = 0;     // the large data units encoded and summed into it
  double checksums = 0;  // CHECKSUM/DATASUM cards, headers into place
};

// How FrameToFits and ModelToFits spread their work: the headers are built one per HDU,
// the large data units (float32 encoding and checksums) in chunks, on up to `threads`
// workers (the caller included). The bytes do not depend on it.
struct FitsWriteOptions {
  // <= 0: DefaultFitsWriteThreads(); 1: everything on the calling thread.
  int threads = 0;
  // The helpers' threads (e.g. the server's host pool, core::ParallelFor's rules: the caller
  // always takes part, a busy pool only makes it slower). Null: a pool of threads - 1 is
  // started for the call and joined before it returns.
  TaskPool* pool = nullptr;
  // The write time that every CHECKSUM/DATASUM comment records ("YYYY-MM-DDThh:mm:ss",
  // UTC, as CFITSIO writes it); empty: now. Tests set it to compare files byte for byte.
  std::string checksum_time;
  // When set, the call's phase times go there.
  FitsWriteTimes* times = nullptr;
  // Where a ProgressiveFrameFile's image comes from and goes back to (null: memory of its
  // own): a server writing frame after frame reuses them, instead of mapping ~70 MB
  // afresh for each, faulting its pages in and unmapping them (a TLB shootdown on every
  // core the server runs on).
  PlaneBufferPool* image_buffers = nullptr;
  // Where a ProgressiveFrameFile that keeps its image writes it from (its writer task,
  // core::BackgroundWriter); null: `pool`. The server gives its writes threads of their
  // own, so that a write, which waits in the kernel for the file, never holds a thread
  // the loads and rows are queued for.
  TaskPool* write_pool = nullptr;
};

// min(8, core::HardwareThreads()): a frame file is ~70 MB, memory bandwidth, not cores,
// bounds it beyond that.
int DefaultFitsWriteThreads();

// desispec's RAW scores of the frame (core/frame/internal/frame_scores.h): the SCORES
// HDU's columns, empty when no bin is in the camera's band. Fibres spread over `pool`
// (core::ParallelFor, up to `max_workers`; null: the calling thread), same values.
std::vector<FrameScore> RawScores(const Frame& frame, TaskPool* pool = nullptr,
                                  int max_workers = 1);

// Builds the frame file in memory: FLUX (primary), IVAR, MASK (uint32), WAVELENGTH,
// RESOLUTION, FIBERMAP (rows specmin..specmin+nspec-1, when given), CHI2PIX, SCORES
// (desispec's RAW scores, core/frame/internal/frame_scores.h; absent when no bin is in the camera's
// band), with desispec's header keywords, DEPNAMnn/DEPVERnn provenance (spexd and
// CFITSIO, the software that made and wrote the numbers; the same for a local run, the
// server and spexctl over the server, whose files are equal) and CHECKSUM/DATASUM on
// every HDU. The bytes are those of one CFITSIO memory file written HDU after HDU with
// fits_write_chksum (internal/frame_writer_reference.h), assembled from HDUs built in
// parallel (`options`). INVALID_ARGUMENT when the frame's arrays do not match its shape.
absl::StatusOr<std::string> FrameToFits(const Frame& frame, const FrameMetadata& meta,
                                        const FitsWriteOptions& options = {});
// Model image file: a primary float64 [H][W] image, EXTNAME IMAGE, with the frame header
// (as desi_extract_spectra --model writes it).
absl::StatusOr<std::string> ModelToFits(const Frame& frame, const FrameMetadata& meta,
                                        const FitsWriteOptions& options = {});

// Writes bytes to `path` atomically: a temporary file in the same directory, fsync,
// then rename. A reader never sees a partial file; on failure nothing is left behind.
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// Writes the bytes of a FITS file to `path` with WriteFileAtomically, gzip-compressed
// when `path` is a gzip name (core/io/gzip_name.h: it ends in ".gz"). The
// CHECKSUM/DATASUM cards stay those of the uncompressed HDUs, as with CFITSIO.
// `gzip_threads` as GzipFitsBytes's `threads`.
absl::Status WriteFitsAtomically(const std::string& path, const std::string& fits,
                                 int gzip_threads = 0);
// The bytes to store for a FITS file at `path`: gzip-compressed for a gzip name,
// else `fits` unchanged (for writers with their own atomic write).
absl::StatusOr<std::string> FitsBytesForPath(const std::string& path, std::string fits);
// The gzip-compressed bytes of a FITS file, as FitsBytesForPath stores them for a gzip
// name: one gzip member compressed in chunks on up to `threads` threads (<= 0: one a core,
// HardwareThreads: compression is bound by the cores, not by memory), the caller's and
// `pool`'s (null: a pool of this call's own), core/io/internal/gzip.h GzipCompress. `fits`
// is only read (a caller may keep it, e.g. to compare a file found there).
absl::StatusOr<std::string> GzipFitsBytes(absl::string_view fits, TaskPool* pool = nullptr,
                                          int threads = 0);

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_WRITER_H_
