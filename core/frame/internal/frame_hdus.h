// The HDUs of desispec's frame file (extraction-spec §5.3) as CFITSIO writes them, without
// their CHECKSUM/DATASUM cards: shared by the serial reference writer
// (frame_writer_reference.h) and the parallel one (core/frame/frame_writer.cc), so that
// both make the same headers by construction.
#ifndef SPEXD_CORE_FRAME_INTERNAL_FRAME_HDUS_H_
#define SPEXD_CORE_FRAME_INTERNAL_FRAME_HDUS_H_

#include <vector>

#include "absl/status/status.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"
#include "core/frame/internal/fits_hdu_assembly.h"
#include "core/io/fits_file.h"

namespace spexd::core::internal {

// The FLUX (and model) header in desi_extract_spectra's order: the input's cards, HELIOCOR,
// NSPEC .. IN_IMG, DEPNAMnn/DEPVERnn (desiutil.depend.add_dependencies), ORIG_PSF, BUNIT
// (updated in place when the input has it), FIBERMIN (added by desispec's write_frame).
// Into the current HDU of `f`.
absl::Status WriteFrameHeader(FitsFile* f, const Frame& frame, const FrameMetadata& meta);

// CFITSIO writes an unsigned image's BZERO before BSCALE; astropy (desispec) the other
// way round. Moves the BSCALE card in front of BZERO in the current HDU.
absl::Status ScaleCardsInAstropyOrder(FitsFile* f);

// Appends the FIBERMAP HDU: rows specmin..specmin+nspec-1 of meta.fibermap_fits, with
// desispec's card order and NUL-padded strings. Nothing when there is no fibermap.
absl::Status AppendFibermap(FitsFile* out, const Frame& frame, const FrameMetadata& meta);

// Appends the SCORES binary table (float64 columns, the comments on the TTYPEn cards, as
// write_frame does). Nothing when `scores` is empty.
absl::Status AppendScores(FitsFile* f, const std::vector<FrameScore>& scores, long nspec);

// The SCORES the file records for these metadata: none under --no-scores, the given ones
// for a float32 stream, else RawScores(frame) (on `pool`, as RawScores says).
std::vector<FrameScore> ScoresToWrite(const Frame& frame, const FrameMetadata& meta,
                                      TaskPool* pool = nullptr, int max_workers = 1);

// The HDUs of a frame file in desispec's write_frame order (extraction-spec §5.3): FLUX
// (primary), IVAR, MASK, WAVELENGTH, RESOLUTION, FIBERMAP (when given), CHI2PIX, SCORES
// (when `scores` is not empty). The float arrays are encoded as float32, as desispec
// writes them. The sources refer to `frame`, `meta` and `scores`, which must outlive their
// use; FrameToFits and the progressive writer both assemble these.
enum class FrameHdu { kFlux, kIvar, kMask, kWavelength, kResolution, kFibermap, kChi2pix, kScores };
struct FrameHduList {
  std::vector<HduSource> hdus;
  std::vector<FrameHdu> kinds;  // what each of `hdus` is
};
FrameHduList FrameHduSources(const Frame& frame, const FrameMetadata& meta,
                             const std::vector<FrameScore>& scores);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_FRAME_INTERNAL_FRAME_HDUS_H_
