// A FITS file assembled from HDUs built independently and in parallel:
// an HDU's bytes, its CHECKSUM and DATASUM included, do not depend on where it sits in the
// file, so each is built in a scratch CFITSIO memory file of its own (an extension after a
// dummy primary HDU) and the pieces are concatenated. The large data units are encoded
// (big-endian, FITS 4.0 §5.3) and summed in chunks straight into the output, instead of
// through CFITSIO's single-threaded buffers; their headers and the small HDUs are still
// CFITSIO's, and the CHECKSUM/DATASUM cards are fits_write_chksum's (fits_checksum.h).
#ifndef SPEXD_CORE_FRAME_INTERNAL_FITS_HDU_ASSEMBLY_H_
#define SPEXD_CORE_FRAME_INTERNAL_FITS_HDU_ASSEMBLY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/task_pool.h"
#include "core/frame/frame_writer.h"
#include "core/frame/internal/fits_checksum.h"
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

// The pieces of AssembleFits, shared with the progressive writer
// (core/frame/progressive_frame_file.h), so that both make the same bytes by construction.

// An HDU between the phases: its scratch file (header, and data written by CFITSIO), its
// place in the output, and the checksum cards waiting for the data's sum.
struct BuiltHdu {
  std::optional<FitsFile> scratch;
  ChecksumCards cards;
  int64_t header_bytes = 0;
  int64_t data_bytes = 0;   // without the padding to whole records
  int64_t padded_bytes = 0;
  std::string data;         // the data unit CFITSIO wrote (kByBuild)
  int64_t offset = 0;       // of the header in the output
  absl::Status status;
};

// Values per encoding task: 1-2 MiB of output, enough tasks to balance 8 workers over an r
// frame's RESOLUTION (12.8 M values) and few enough that scheduling costs nothing.
inline constexpr std::size_t kEncodeChunkValues = std::size_t{1} << 18;

// Phase 1: the header of `src` (and a kByBuild data unit) in a scratch file, its CHECKSUM
// and DATASUM cards in place (their values still to come), `time` in their comments. The
// header's size is final: the cards' count does not depend on the data.
absl::Status BuildHdu(const HduSource& src, const std::string& time, BuiltHdu* out);
// Phase 1 for every HDU, on up to `workers` of `pool`, each HDU's offset in the output set;
// returns the output's size, or the first HDU's error.
absl::StatusOr<int64_t> BuildHdus(const std::vector<HduSource>& hdus, const std::string& time,
                                  TaskPool* pool, int workers, std::vector<BuiltHdu>* built);
// Bytes per value of an encoded data unit: 8 for float64, else 4.
std::size_t BytesPerValue(HduSource::Encoding e);
// Values [begin, end) of `values` (HduSource::values) encoded to `out` (which receives
// value `begin` first); returns the ones' complement sum of the bytes written.
uint32_t EncodeValues(HduSource::Encoding encoding, const void* values, std::size_t begin,
                      std::size_t end, char* out);
// A kByBuild data unit copied to `data_unit` (zero-filled to its padded size); its sum.
uint32_t DataUnitSum(const BuiltHdu& b, char* data_unit);
// Phase 3: the header's final bytes given its data unit's sum (size checked unchanged).
absl::StatusOr<std::string> FinishHeader(BuiltHdu& b, uint32_t datasum);
// A zero-filled string of `n` bytes whose pages all workers fault in first. A fresh mapping
// of an r frame's 70 MB costs a page fault per 4 KiB on first touch, taken one by one on
// the thread that zero-fills it: as long as the whole encoding on a 2-core host. Huge pages where
// the kernel grants them (THP "madvise" mode) need 1/512 of the faults; the advice is only
// advice.
std::string ZeroFilledOutput(std::size_t n, TaskPool* pool, int workers);
// `n` zero bytes from `buffers` (null: a block of its own), zeroed in 4 MiB pieces by all
// workers: a reused block at memory speed, a new one faulted in (huge pages advised) as
// it is zeroed. Throws std::bad_alloc.
PlaneBuffer<char> ZeroFilledBlock(std::size_t n, PlaneBufferPool* buffers, TaskPool* pool,
                                  int workers);
// An output image of `n` bytes laid out as `built` (the HDUs of `hdus`) from `buffers`, as
// the block's last user left it, with zeros only where nothing else writes: each header
// (its writer copies a whole one in) and each data unit's padding, and of a kByBuild unit
// what CFITSIO did not fill. For a writer that writes every other byte itself (a frame file
// written bundle by bundle): zero-filling the whole block was a pass over an r frame's
// 70 MB for every frame. HDUs that do not tile the image: ZeroFilledBlock's. Throws
// std::bad_alloc.
PlaneBuffer<char> ImageWithZeroedGaps(const std::vector<BuiltHdu>& built,
                                      const std::vector<HduSource>& hdus, int64_t n,
                                      PlaneBufferPool* buffers, TaskPool* pool, int workers);

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
