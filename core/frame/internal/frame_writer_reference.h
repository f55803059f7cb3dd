// The frame and model files written the plain way: one CFITSIO memory file, HDU after HDU,
// float32 copies of the arrays, fits_write_chksum on each HDU, all on the calling thread.
// core::FrameToFits assembles
// the same bytes from HDUs built in parallel (frame_writer.cc). Kept as the reference the
// tests compare that with byte for byte, and as the benchmark's baseline.
#ifndef SPEXD_CORE_FRAME_INTERNAL_FRAME_WRITER_REFERENCE_H_
#define SPEXD_CORE_FRAME_INTERNAL_FRAME_WRITER_REFERENCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"

namespace spexd::core::internal {

// Same contract as core::FrameToFits / core::ModelToFits; the CHECKSUM/DATASUM comments
// carry CFITSIO's clock at each HDU.
absl::StatusOr<std::string> FrameToFitsReference(const Frame& frame, const FrameMetadata& meta);
absl::StatusOr<std::string> ModelToFitsReference(const Frame& frame, const FrameMetadata& meta);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_FRAME_INTERNAL_FRAME_WRITER_REFERENCE_H_
