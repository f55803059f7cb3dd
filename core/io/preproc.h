// DESI preproc image reader (IMAGE, IVAR, MASK, FIBERMAP): extraction-spec §2.1, §5.1
// and the mask / non-finite rules of the spec's "Decisions".
#ifndef SPEXD_CORE_PREPROC_H_
#define SPEXD_CORE_PREPROC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"
#include "core/io/plane_buffer.h"
#include "core/base/task_pool.h"

namespace spexd::core {

enum class MaskPolicy {
  kDesispec,  // MASK & 0x2FF != 0 -> ivar = 0 (desi_extract_spectra; default)
  kAnyBit,    // MASK != 0 -> ivar = 0 (gpu_specter's spex)
  // As kDesispec for pixels; the frame's ALLBADPIX bit then uses desispec's exact rule
  // (pixmask_fraction == 1.0) instead of spexd's >= 1 - 1e-12 (core/frame/frame.h).
  kDesispecExact,
};
inline constexpr uint32_t kDesispecExtractMask = 0x2FF;

// The MASK bits that make a pixel unmeasured: desi_extract_spectra's extractmaskval
// (bits 0-7 and 9; bit 8 BADREADNOISE is kept) or, for kAnyBit, gpu_specter's spex.
// Spec §2.1 and "Decisions".
inline uint16_t MaskBadBits(MaskPolicy policy) {
  return policy != MaskPolicy::kAnyBit ? static_cast<uint16_t>(kDesispecExtractMask)
                                         : static_cast<uint16_t>(0xFFFF);
}

// A frame ready for extraction: image and ivar widened to float64, with the mask policy
// and the non-finite rule (non-finite image or ivar -> image = 0, ivar = 0) applied.
// A reader asked to keep float32 planes (PreprocOptions::keep_float32) fills image32 and
// ivar32 instead, with the same values unwidened (float32 -> float64 is exact, so
// WidenPlanes gives the float64 planes bit for bit); exactly one of the two pairs is set.
struct PreprocImage {
  int height = 0;  // rows (y, wavelength direction)
  int width = 0;   // columns (x, fibre direction)
  std::vector<double> image;  // [height][width]
  std::vector<double> ivar;   // [height][width]
  PlaneBuffer<float> image32;  // [height][width], instead of image
  PlaneBuffer<float> ivar32;   // [height][width], instead of ivar
  bool has_float32_planes() const { return !image32.empty() || !ivar32.empty(); }
  // For a backend that applies the pixel rules itself (PreprocOptions::keep_raw): plain
  // float32 IMAGE and IVAR as the file stores them (big-endian IEEE words, copied from the
  // file, or for a .fits.gz parts of the block it was inflated into, and never decoded on
  // the host) and the MASK bits (empty: no MASK), with none of
  // the rules applied: `raw_bad_bits` (MaskBadBits) says which mask bits the backend
  // applies. Instead of the two pairs above; n_masked and n_nonfinite stay 0 (the host
  // did not apply the rules). DecodeRawPlanes turns them into ruled float32 planes.
  PlaneBuffer<uint32_t> image_raw;  // [height][width]
  PlaneBuffer<uint32_t> ivar_raw;   // [height][width]
  PlaneBuffer<uint16_t> mask_raw;   // [height][width] or empty
  uint16_t raw_bad_bits = 0;
  bool has_raw_planes() const { return !image_raw.empty() || !ivar_raw.empty(); }
  // Header cards of the IMAGE HDU (see FitsFile::ReadUserCards), carried to the output.
  std::vector<std::string> image_header;
  // The FIBERMAP table as the bytes of a small FITS file (empty primary + FIBERMAP
  // BINTABLE); empty when the input has no FIBERMAP.
  std::string fibermap_fits;
  // Counters for logs and metrics. A pixel that is both masked and non-finite counts in
  // both.
  std::size_t n_masked = 0;     // pixels given ivar 0 by the mask policy, or for ivar < 0
  std::size_t n_nonfinite = 0;  // pixels given ivar 0 by the non-finite rule
  std::string source_name;
};

struct PreprocOptions {
  MaskPolicy mask_policy = MaskPolicy::kDesispec;
  bool require_fibermap = false;
  // Keep IMAGE and IVAR as float32 (PreprocImage::image32/ivar32) when the file stores
  // both as plain float32 images, for a backend that takes float32 planes
  // (GpuCapabilities::TakesFloat32Planes): no widening on the host, none to undo before an upload.
  // Otherwise (float64, scaled or tile-compressed planes) they are float64 as usual.
  bool keep_float32 = false;
  // Keep plain float32 IMAGE and IVAR as the file's own bytes, with the MASK bits and no
  // pixel rule applied (PreprocImage::image_raw, ivar_raw, mask_raw), for a backend that
  // does byte order, widening and the rules itself (Backend::TakesRawPlanes): the host
  // copies each plane once, from the file into `buffers`; a .fits.gz is inflated into a
  // block from `buffers` whose IMAGE and IVAR data are the planes, with no copy (the frame
  // keeps the block, as big as the inflated file, until its planes go).
  // Other planes (float64, scaled, tile-compressed) are read as keep_float32 says.
  bool keep_raw = false;
  // Threads that decode a frame's planes, in chunks (core/base/parallel_for.h), besides the
  // caller's; null: the caller alone. Not owned; must outlive Read.
  TaskPool* pool = nullptr;
  // Where float32 planes get their memory (reused across frames); null: their own. Not
  // owned; buffers drawn from it may outlive it.
  PlaneBufferPool* buffers = nullptr;
  // Where the memory a load needs only while it lasts comes from: a .fits.gz input's
  // compressed and inflated bytes (given back when the reader goes; inflated into
  // `buffers` instead with keep_raw) and the inflation's work buffers, and the MASK bits
  // (given back by Read); reused across frames: no page faults, no zeroing. Null: blocks
  // of their own. Not owned; the same lifetime rule.
  PlaneBufferPool* load_buffers = nullptr;
};

// A preproc file opened and checked from its headers (HDUs present, 2-D float IMAGE and
// IVAR, integer MASK, same shapes, within options.limits), before any pixel is decoded,
// so that a caller can refuse the request cheaply first. Gzip-compressed files (DESI's
// .fits.gz, recognised by their magic bytes) are inflated within options.limits first.
// IMAGE and IVAR may be float32 or float64 (any HDU position, found by EXTNAME; IMAGE may
// be the primary); MASK is optional, plain or tile-compressed, integer typed. Errors name
// the file and problem: missing HDU, non-image HDU, wrong pixel type (e.g. integer
// IMAGE), shape mismatch between IMAGE, IVAR and MASK, empty image, truncated data.
//
// `limits` are checked from the headers before any pixel is decoded, and while a gzip
// file inflates: RESOURCE_EXHAUSTED past them (limits.max_image_pixels bounds every
// plane, hence the memory a decode takes: 18 bytes a pixel). `stop` (may be empty) is
// polled while a gzip file inflates, before decoding and between planes: true stops
// with CANCELLED.
class PreprocReader {
 public:
  static absl::StatusOr<PreprocReader> Open(const std::string& path, const PreprocOptions& options,
                                            const FitsSizeLimits& limits = {}, StopFn stop = {});
  // Takes the file's bytes (plain or gzip FITS) without copying them.
  static absl::StatusOr<PreprocReader> OpenMemory(std::string bytes, const std::string& name,
                                                  const PreprocOptions& options,
                                                  const FitsSizeLimits& limits = {},
                                                  StopFn stop = {});

  int height() const { return static_cast<int>(image_info_.naxes[1]); }
  int width() const { return static_cast<int>(image_info_.naxes[0]); }

  // Decodes the planes and applies the pixel rules. Call at most once. Plain float
  // IMAGE and IVAR planes are byte-swapped in chunks on options.pool while the caller
  // decodes MASK (usually tile-compressed: CFITSIO) and copies FIBERMAP; the values are
  // those CFITSIO gives (core/io/internal/plane_decode.h). With keep_raw they are copied
  // as they are instead, and the rules left to the backend.
  absl::StatusOr<PreprocImage> Read();

  // The IMAGE header cards and the FIBERMAP (FITS bytes, "" without one), without
  // decoding the planes: what --barycentric-correction needs before the grid is planned.
  absl::StatusOr<std::pair<std::vector<std::string>, std::string>> Headers();

 private:
  PreprocReader(FitsFile file, const PreprocOptions& options, const FitsSizeLimits& limits,
                StopFn stop)
      : file_(std::move(file)), options_(options), limits_(limits), stop_(std::move(stop)) {}
  // A reader of the FITS file inflated from a .fits.gz (its memory goes with the reader).
  static absl::StatusOr<PreprocReader> OpenInflated(InflatedFits fits, const std::string& name,
                                                    const PreprocOptions& options,
                                                    const FitsSizeLimits& limits, StopFn stop);
  absl::Status CheckHeaders();
  absl::Status Stopped() const;
  absl::StatusOr<PreprocImage> ReadPlanes();
  // MASK (when the file has one) into `mask`, from `buffers`; FIBERMAP (when it has one)
  // into the frame.
  absl::Status ReadMask(PlaneBufferPool* buffers, PlaneBuffer<uint16_t>* mask);
  // Plain float32 IMAGE and IVAR as the file's bytes, with MASK and FIBERMAP
  // (PreprocOptions::keep_raw).
  absl::Status ReadRawPlanes(const FitsFile::RawFloatImage& raw_image,
                             const FitsFile::RawFloatImage& raw_ivar, PreprocImage* frame);
  absl::Status ReadFibermap(PreprocImage* frame);

  FitsFile file_;
  PreprocOptions options_;
  FitsSizeLimits limits_;
  StopFn stop_;
  FitsFile::ImageInfo image_info_;
  bool has_mask_ = false, has_fibermap_ = false;
  // IMAGE and IVAR are plain float32 planes: their values are within float32's range.
  bool float32_values_ = false;
};

// The FIBERMAP HDU of a fibermap file (desi_extract_spectra -f), as the FITS bytes a
// PreprocImage carries.
absl::StatusOr<std::string> ReadFibermapFile(const std::string& path);

// The rule for a fibermap that goes into a frame (a -f fibermap, whoever writes the frame:
// spexctl --local, the server, or the client of a streamed frame): `fibermap_fits` holds a
// FIBERMAP binary table with a row for every fibre below specmin + nspec (the frame gets
// rows specmin .. specmin + nspec - 1, as desispec slices it). INVALID_ARGUMENT otherwise.
absl::Status CheckFibermapRows(const std::string& fibermap_fits, int64_t specmin, int64_t nspec);

// PreprocReader::Open (or OpenMemory on a copy of the bytes), then Read.
absl::StatusOr<PreprocImage> ReadPreproc(const std::string& path, const PreprocOptions& options);
absl::StatusOr<PreprocImage> ReadPreprocFromMemory(const void* data, std::size_t size,
                                                   const std::string& name,
                                                   const PreprocOptions& options);

// Applies the mask policy and non-finite rule in place (exposed so that callers that
// build frames in memory, e.g. the service, use the same rules). Also sets a negative
// ivar to 0 (counted in n_masked), which the reference leaves unhandled (spec §2.1).
// `mask` (may be null: no mask) has frame->image.size() entries. Sets (does not add to)
// frame->n_masked and frame->n_nonfinite. Works on whichever planes the frame has
// (float64 or float32, with the same results), in chunks on `pool` when given.
void ApplyPixelRules(const uint16_t* mask, MaskPolicy policy, PreprocImage* frame,
                     TaskPool* pool = nullptr);

// Replaces float32 (or raw: DecodeRawPlanes first) planes by the float64 ones (exact);
// nothing for a float64 frame. For a backend that does not take float32 planes. Chunks on
// `pool` when given.
void WidenPlanes(PreprocImage* frame, TaskPool* pool = nullptr);

// Replaces raw planes (PreprocImage::image_raw) by float32 ones (image32, ivar32) with the
// pixel rules applied and counted, as the reader gives them with keep_raw off: for a
// consumer that needs the values on the host (a backend that does not take raw planes,
// the shadow parity check). Nothing for a frame without raw planes. Chunks on `pool`.
void DecodeRawPlanes(PreprocImage* frame, TaskPool* pool = nullptr);

// Pixels of the frame's planes (image, image32 or image_raw).
inline std::size_t PlanePixels(const PreprocImage& frame) {
  if (frame.has_raw_planes()) return frame.image_raw.size();
  return frame.has_float32_planes() ? frame.image32.size() : frame.image.size();
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_PREPROC_H_
