// ProgressiveFrameFile's state (progressive_frame_file.h), shared by its files: the
// layout, the sums and rows so far, the image or scratch buffers, the writers.
#ifndef SPEXD_CORE_FRAME_INTERNAL_PROGRESSIVE_FRAME_STATE_H_
#define SPEXD_CORE_FRAME_INTERNAL_PROGRESSIVE_FRAME_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/base/background_writer.h"
#include "core/frame/frame.h"
#include "core/frame/internal/fits_hdu_assembly.h"
#include "core/frame/internal/frame_hdus.h"
#include "core/frame/progressive_frame_file.h"
#include "core/io/internal/gzip_image.h"
#include "core/io/plane_buffer.h"

namespace spexd::core {
namespace internal {

// The HDUs written bundle by bundle (AddRows): the rest is Finish's.
inline bool PerBundle(FrameHdu k) {
  return k == FrameHdu::kFlux || k == FrameHdu::kIvar || k == internal::FrameHdu::kResolution ||
         k == FrameHdu::kChi2pix;
}

// A buffer values are encoded into before they are written, where the image is not kept.
struct Scratch {
  std::unique_ptr<char[]> data;
  std::size_t bytes = 0;
};

}  // namespace internal

struct ProgressiveFrameFile::State {
  explicit State(const FitsWriteOptions& options) : threads(options) {}
  internal::WriterThreads threads;
  Frame shape;  // the shape and recorded grid, no arrays: what the headers read
  FrameMetadata meta;
  int fd = -1;
  std::string name;
  std::string time;     // in the checksum comments
  bool restamp = false;  // time is Create's "now": Finish puts its own in
  internal::FrameHduList sources;
  std::vector<internal::BuiltHdu> built;
  std::vector<uint32_t> datasum;  // so far, per HDU
  PlaneBuffer<char> image;        // the file up to the end of CHI2PIX (keep_image)
  // Without the image: its size, a buffer the rows are encoded into and written from, and
  // WAVELENGTH's and FIBERMAP's data units (padded), written by Finish.
  bool keep_image = true;
  int64_t image_bytes = 0;
  internal::Scratch finish_scratch;  // Finish's encoding buffer
  std::vector<std::string> built_units;
  std::string tail;               // SCORES, after Finish
  // RAW scores are per fibre (frame_scores.h): computed row by row as the bundles come,
  // unless the metadata give them (a float32 stream) or want none.
  bool scores_by_row = false;
  std::vector<FrameScore> scores;  // [columns], values [nspec]; empty: none so far
  std::vector<char> row_done;
  int rows_left = 0;
  absl::Status failed;  // the first write error; sticks
  // gzip: the image compressed as its bytes become final (nothing written before Finish).
  std::unique_ptr<GzipImage> gz;
  // AddRows of different bundles run at once (their rows are disjoint bytes of the image
  // and the file): this guards what they share, the fields above that AddRows changes
  // (failed, datasum, row_done, rows_left, scores, gz's bookkeeping) and spare_scratch.
  // Finish runs alone, after every AddRows has returned.
  absl::Mutex mu;
  std::vector<internal::Scratch> spare_scratch;  // AddRows' buffers without the image, for reuse
  // Without the image: one write into the file at a time. The kernel serialises writes to
  // one file on its inode lock anyway, and its waiters spin (3.5 % of a 64-core host's
  // samples with four bundles writing at once), where these sleep.
  absl::Mutex write_mu;
  // With the image and without gzip: the image's ranges are written by one pool task at
  // a time while the next rows are encoded, and what is left by WriteRest (or Finish).
  // Declared last: it goes first, waiting for its write in progress while the image and
  // tail it reads still exist.
  std::unique_ptr<BackgroundWriter> writer;

  int64_t data_offset(std::size_t i) const { return built[i].offset + built[i].header_bytes; }
  // Where the bytes of HDU i's data unit that are final from Create on begin: WAVELENGTH's
  // and FIBERMAP's data are built by Create; of the others (rows, MASK) only the padding.
  int64_t FinalFromCreate(std::size_t i) const {
    return sources.hdus[i].encoding == internal::HduSource::Encoding::kByBuild
               ? 0
               : built[i].data_bytes;
  }
  std::size_t values_per_row(std::size_t i) const {
    return static_cast<std::size_t>(sources.kinds[i] == internal::FrameHdu::kResolution
                                        ? (2 * shape.ndiag + 1) * shape.nwave
                                        : shape.nwave);
  }
  // Writes (with gz: declares final; with the writer: queues) [offset, offset + n); the
  // first failure sticks. Under mu while AddRows may run.
  absl::Status WriteAt(int64_t offset, const char* data, int64_t n);
  // values [begin, end) of HDU i from `values` into the image at value `at` (or into
  // `scratch`, grown as needed), *out where they went; their sum.
  // What `values` are: the HDU's values (doubles, or MASK's uint32), little-endian
  // float32 bytes of a float32 HDU (a float32 stream's), or its bytes as the file stores
  // them (summed, and copied into the image or written from where they are; with
  // `word_sum`, their words' exact sum taken already, not summed again).
  enum class Form { kValues, kFloat32Bytes, kFileBytes };
  uint32_t Encode(std::size_t i, const void* values, std::size_t count, std::size_t at,
                  internal::Scratch* scratch, const char** out, Form form = Form::kValues,
                  const uint64_t* word_sum = nullptr);
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_INTERNAL_PROGRESSIVE_FRAME_STATE_H_
