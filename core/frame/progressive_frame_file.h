// A desispec frame file written while the frame is being extracted:
// the same bytes as FrameToFits, but FLUX, IVAR, RESOLUTION and CHI2PIX (final once their
// bundle is, extraction-spec §2.12-2.13; RESOLUTION alone is ~51 of an r frame's 70 MB)
// go to the file bundle by bundle, so that after the last bundle only the frame-wide
// parts are left: MASK (the specmask's medians, §2.13), SCORES, and the headers with
// their CHECKSUM/DATASUM (ones' complement sums: additive, so summed per bundle).
//
// The layout is known up front: every header's size is fixed by its card count, which
// does not depend on the values (the CHECKSUM/DATASUM cards are there from the start,
// fits_checksum.h). The file itself (temporary, atomic rename, its directory's rules) is
// the caller's: this class only writes into a descriptor at offsets.
#ifndef SPEXD_CORE_FRAME_PROGRESSIVE_FRAME_FILE_H_
#define SPEXD_CORE_FRAME_PROGRESSIVE_FRAME_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/frame/extraction_result.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"

namespace spexd::core {

// What a frame file's layout depends on: its shape and its recorded wavelength grid.
struct FrameFileShape {
  int specmin = 0;  // fibre of row 0 (FIBERMIN)
  int nspec = 0, nwave = 0, ndiag = 0;
  std::vector<double> wave;  // [nwave], written as WAVELENGTH
};

// A bundle's rows as a float32 stream carries them (BundleData's *_f32 fields): the
// little-endian float32 bytes of FLUX, IVAR and CHI2PIX ([nfibers][nwave]) and RESOLUTION
// ([nfibers][2*ndiag+1][nwave]), per Angstrom. Written as they are, they are the bytes
// AddRows writes for the float64 values they round.
struct Float32Rows {
  int bundle = 0;
  int nfibers = 0;
  std::string flux, ivar, rdiags, chi2pix;
};

class ProgressiveFrameFile {
 public:
  // Lays the file out (every header but SCORES' is built here) and faults in the pages of
  // its memory image (when kept) on options.pool (options.threads workers, as
  // FrameToFits). Writes into `fd` (borrowed: open for writing, on an empty file, until
  // this object goes) for AddRows, Finish and WriteRest only; `name` is for messages.
  // With the image (and without gzip) the image's bytes are written by one task at a time
  // on options.write_pool (or options.pool; core::BackgroundWriter) while the next rows
  // are encoded, so that rows wait neither for the file nor for each other's writes: the
  // file is whole once Finish (or, after Finish(..., write_rest = false), WriteRest) has
  // returned.
  // options.checksum_time empty: the checksum comments record the time of Finish.
  // INVALID_ARGUMENT for a bad shape.
  // keep_image false: the file's bytes are not kept in memory (pieces() is then empty):
  // each call encodes into a reused buffer and writes from it, sparing a writer that does
  // not hash the file (spexctl) the ~70 MB image's zero fill and page faults.
  // gzip (with keep_image): `fd` gets the file as one gzip member (a .fits.gz), written
  // whole by Finish; meanwhile each chunk of the image (1 MiB at most, each header its
  // own) is deflated as a task on the pool as soon as AddRows has made its bytes final
  // (core/io/internal/gzip_image.h), so that Finish has left only the headers, MASK (which
  // deflates fast: mostly zeros), SCORES and the chunks no thread has taken yet.
  static absl::StatusOr<std::unique_ptr<ProgressiveFrameFile>> Create(
      const FrameFileShape& shape, const FrameMetadata& meta, int fd, std::string name,
      const FitsWriteOptions& options = {}, bool keep_image = true, bool gzip = false);
  ~ProgressiveFrameFile();

  // Rows [row, row + bundle.nfibers) of FLUX, IVAR, RESOLUTION and CHI2PIX from a bundle
  // that went through FinalizeBundle: encoded (float32, big-endian) and summed on the
  // pool, written at their offsets (with the image: queued for the writer task), and
  // their writeback started (sync_file_range), so that the caller's fsync has little
  // left; and the rows' RAW scores (per fibre, from the float64 values and the recorded
  // grid, as FrameToFits computes them). Bundles in any order, each row once; calls for
  // different bundles may run at once (their rows are disjoint bytes), but not beside
  // Create or Finish. After a failed write every later call returns the same error (a
  // queued write's failure comes back from a later call, at the latest from Finish or
  // WriteRest). A bundle whose RESOLUTION comes narrowed already (rdiags_file, rdiags
  // empty) has those bytes written as they are.
  absl::Status AddRows(int row, const BundleResult& bundle);
  // The same from a float32 stream's rows, without widening them: for a file whose
  // scores are given (meta.given_scores), as a float32 stream's are.
  absl::Status AddRows(int row, const Float32Rows& rows);

  // The rest, once every row is in: MASK from frame.mask, SCORES (the rows' scores, or
  // meta.given_scores; none under --no-scores), every header with its CHECKSUM/DATASUM.
  // Of the frame only its shape and mask are read. `given_scores`, when set, are written
  // instead (unless meta.scores is false): a float32 stream's, computed by the server
  // from the float64 values and received after the last bundle (give Create a
  // meta.given_scores, even empty, so that AddRows does not compute them). Does not sync:
  // the caller fsyncs and renames.
  // With `write_rest` false the file is made whole in memory (stored_pieces(): with gzip
  // the member) but what is not written yet is left to WriteRest, so that a caller can
  // hash the bytes beside their write.
  absl::Status Finish(const Frame& frame, const std::vector<FrameScore>* given_scores = nullptr,
                      bool write_rest = true);
  // After Finish(..., write_rest = false) succeeded: writes the gzip member (once), or the
  // image's bytes not written yet, and waits for the writer task; may run beside readers
  // of stored_pieces(). Nothing to do without the image.
  absl::Status WriteRest();
  // Drops the writes not started and waits for the one in progress (with the writer
  // task): for a caller that closes the descriptor without WriteRest, after an error.
  // Later calls fail.
  void StopWrites();

  // The file's bytes in order, valid after Finish (and while this object lives): to hash
  // the file without reading it back. Empty unless Create kept the image.
  std::vector<absl::string_view> pieces() const;
  int64_t size() const;
  // The bytes written to the descriptor, in order, after Finish: the gzip member with
  // gzip, else pieces().
  std::vector<absl::string_view> stored_pieces() const;
  // With gzip: the image's chunks deflated while the rows came, and by Finish.
  int gzip_early_chunks() const;
  int gzip_late_chunks() const;
  int64_t gzip_late_bytes() const;  // uncompressed bytes deflated by Finish

  ProgressiveFrameFile(const ProgressiveFrameFile&) = delete;
  ProgressiveFrameFile& operator=(const ProgressiveFrameFile&) = delete;

 private:
  struct State;
  // AddRows' values, per HDU kind: doubles (and the bundle, for the RAW scores) or
  // little-endian float32 bytes.
  struct RowValues {
    int bundle = 0;
    int nfibers = 0;
    const void* flux = nullptr;
    const void* ivar = nullptr;
    const void* rdiags = nullptr;
    const void* chi2pix = nullptr;
    bool float32_bytes = false;
    bool rdiags_file_bytes = false;  // rdiags: the file's bytes (BundleResult::rdiags_file)
    const uint64_t* rdiags_file_word_sum = nullptr;  // their words' sum, where it was taken
    const BundleResult* doubles = nullptr;
  };
  explicit ProgressiveFrameFile(std::unique_ptr<State> state);
  absl::Status AddRowValues(int row, const RowValues& v);
  std::unique_ptr<State> s_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_PROGRESSIVE_FRAME_FILE_H_
