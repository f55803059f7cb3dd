// Frames, FIBERMAPs and bundles for the frame-file tests and benchmarks (the writer, the
// progressive writer, the server's row writer): one generator, so that they share inputs.
#ifndef SPEXD_TESTS_FRAME_FIXTURES_H_
#define SPEXD_TESTS_FRAME_FIXTURES_H_

#include <cstdint>
#include <string>

#include "core/frame/extraction_result.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"
#include "core/frame/progressive_frame_file.h"
#include "core/io/fits_file.h"

namespace spexd::testing {

// Deterministic values of desispec's ranges (specmin 3), with NaN, +-Inf, -0 and denormals
// among them when `specials` (a float64 that rounds to a float32 denormal or overflows
// included).
core::Frame MakeTestFrame(int nspec, int nwave, int ndiag, uint64_t seed, bool specials);
// A FIBERMAP of `rows` rows (FIBER = 0..rows-1, a float, a double, a 64-bit integer and a
// blank-padded string), with CHECKSUM/DATASUM as desispec's inputs carry them if asked.
std::string MakeTestFibermap(int rows, bool checksum);
// Appends to `f` a FIBERMAP table of one column, FIBER (int32) = 0..rows-1: the least a
// preproc's reader copies. CFITSIO's status (0: written).
int AppendFiberTable(core::FitsFile& f, int rows);
// Rows [row, row + n) of `f` as bundle `index`, finalised (per Angstrom), as a backend's
// bundle reaches the frame file.
core::BundleResult FrameRows(const core::Frame& f, int index, int row, int n);
// The header cards and provenance of an r1 frame on DESI's r grid (5760-7620 A, 0.8 A).
core::FrameMetadata R1FrameMeta();
// The layout-deciding shape of `f` (core::ProgressiveFrameFile).
core::FrameFileShape FileShapeOf(const core::Frame& f);

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_FRAME_FIXTURES_H_
