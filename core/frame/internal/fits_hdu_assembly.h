// A FITS file assembled from HDUs built independently and in parallel (issue 22 item 4):
// an HDU's bytes, its CHECKSUM and DATASUM included, do not depend on where it sits in the
// file, so each is built in a scratch CFITSIO memory file of its own (an extension after a
// dummy primary HDU) and the pieces are concatenated. The large data units are encoded
// (big-endian, FITS 4.0 §5.3) and summed in chunks straight into the output, instead of
// through CFITSIO's single-threaded buffers; their headers and the small HDUs are still
// CFITSIO's, and the CHECKSUM/DATASUM cards are fits_write_chksum's (fits_checksum.h).
#ifndef SPEXD_CORE_FRAME_INTERNAL_FITS_HDU_ASSEMBLY_H_
#define SPEXD_CORE_FRAME_INTERNAL_FITS_HDU_ASSEMBLY_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/task_pool.h"
#include "core/frame/frame_writer.h"
#include "core/io/fits_file.h"

namespace spexd::core::internal {

struct HduSource {
  // How the data unit is made: by `build` through CFITSIO (small HDUs), or encoded here
  // from `values` (large images; `build` then only creates the header, e.g. with
  // FitsFile::CreateImage).
  enum class Encoding { kByBuild, kFloat32, kUint32WithZero, kFloat64 };

  // Builds the HDU in `scratch`, a fresh memory file: empty for the primary HDU, else
  // holding a dummy primary HDU, so that the new one is an extension. Leaves the new HDU
  // current. Runs on any thread, concurrently with the other HDUs' builds.
  std::function<absl::Status(FitsFile& scratch)> build;
  bool primary = false;
  Encoding encoding = Encoding::kByBuild;
  const void* values = nullptr;  // double (kFloat32, kFloat64) or uint32_t; outlives the call
  std::size_t count = 0;         // values; must match the header's NAXISn
};

// The workers and pool that FitsWriteOptions asks for: its pool, else one of workers - 1
// threads started here and joined when this goes.
class WriterThreads {
 public:
  explicit WriterThreads(const FitsWriteOptions& options);
  TaskPool* pool() const { return pool_; }
  int workers() const { return workers_; }

 private:
  int workers_ = 1;
  std::unique_ptr<TaskPool> own_;
  TaskPool* pool_ = nullptr;
};

// The file of `hdus` in order, each with its CHECKSUM/DATASUM as fits_write_chksum writes
// them, with `checksum_time` in their comments (empty: now). Phase times into `times`
// when set.
absl::StatusOr<std::string> AssembleFits(const std::vector<HduSource>& hdus,
                                         const WriterThreads& threads,
                                         const std::string& checksum_time,
                                         FitsWriteTimes* times = nullptr);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_FRAME_INTERNAL_FITS_HDU_ASSEMBLY_H_
