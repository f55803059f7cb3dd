#include "core/frame/frame_writer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/atomic_file.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/base/write_fully.h"
#include "core/frame/internal/fits_hdu_assembly.h"
#include "core/frame/internal/frame_hdus.h"
#include "core/frame/internal/frame_scores.h"
#include "core/io/fits_file.h"
#include "core/io/gzip_name.h"
#include "core/io/internal/gzip.h"

namespace spexd::core {
namespace {

using internal::HduSource;

// The writer reads exactly the values the header announces; a frame whose arrays do not
// match its shape is refused rather than read past.
absl::Status CheckFrameShape(const Frame& frame) {
  const std::size_t ns = static_cast<std::size_t>(std::max(frame.nspec, 0));
  const std::size_t nw = static_cast<std::size_t>(std::max(frame.nwave, 0));
  const std::size_t nk = static_cast<std::size_t>(std::max(2 * frame.ndiag + 1, 0));
  const bool ok = frame.nspec >= 0 && frame.nwave >= 0 && frame.ndiag >= 0 &&
                  frame.wave.size() == nw && frame.flux.size() == ns * nw &&
                  frame.ivar.size() == ns * nw && frame.mask.size() == ns * nw &&
                  frame.chi2pix.size() == ns * nw && frame.rdiags.size() == ns * nk * nw;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "frame arrays do not match ", frame.nspec, " spectra x ", frame.nwave, " wavelengths (",
      frame.ndiag, " diagonals): wave ", frame.wave.size(), ", flux ", frame.flux.size(), ", ivar ",
      frame.ivar.size(), ", mask ", frame.mask.size(), ", chi2pix ", frame.chi2pix.size(),
      ", resolution ", frame.rdiags.size()));
}

}  // namespace

int DefaultFitsWriteThreads() { return std::min(8, HardwareThreads()); }

// The HDUs of desispec's write_frame (extraction-spec §5.3), in its order; the headers are
// those of the serial reference writer (internal/frame_hdus.h), the float arrays are
// written as float32 as desispec writes them.
absl::StatusOr<std::string> FrameToFits(const Frame& frame, const FrameMetadata& meta,
                                        const FitsWriteOptions& options) {
  SPEXD_RETURN_IF_ERROR(CheckFrameShape(frame));
  const internal::WriterThreads threads(options);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<FrameScore> scores =
      internal::ScoresToWrite(frame, meta, threads.pool(), threads.workers());
  if (options.times != nullptr) {
    options.times->scores +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return internal::AssembleFits(internal::FrameHduSources(frame, meta, scores).hdus, threads,
                                options.checksum_time, options.times);
}

std::vector<FrameScore> RawScores(const Frame& frame, TaskPool* pool, int max_workers) {
  return ComputeRawScores(frame, pool, max_workers);
}

absl::StatusOr<std::string> ModelToFits(const Frame& frame, const FrameMetadata& meta,
                                        const FitsWriteOptions& options) {
  if (frame.model.empty()) return absl::FailedPreconditionError("frame has no model image");
  const long width = frame.model_width, height = frame.model_height;
  if (width < 0 || height < 0 ||
      frame.model.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height)) {
    return absl::InvalidArgumentError(absl::StrCat("model image of ", frame.model.size(),
                                                   " values for ", height, " x ", width));
  }
  HduSource image;
  image.primary = true;
  image.build = [&](FitsFile& f) {
    SPEXD_RETURN_IF_ERROR(f.CreateImage<double>("IMAGE", {width, height}));
    SPEXD_RETURN_IF_ERROR(internal::WriteFrameHeader(&f, frame, meta));
    int status = 0;
    fits_delete_key(f.get(), "EXTEND", &status);  // one HDU: desispec's file has no EXTEND
    if (status != 0) return f.Error(status, "writing the model header");
    return absl::OkStatus();
  };
  image.encoding = HduSource::Encoding::kFloat64;
  image.values = frame.model.data();
  image.count = frame.model.size();
  return internal::AssembleFits({std::move(image)}, internal::WriterThreads(options),
                                options.checksum_time, options.times);
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  SPEXD_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  SPEXD_RETURN_IF_ERROR(WriteFully(file.fd(), bytes.data(), bytes.size(), -1, path));
  return file.Commit();
}

absl::StatusOr<std::string> GzipFitsBytes(absl::string_view fits, TaskPool* pool, int threads) {
  const int workers = threads > 0 ? threads : HardwareThreads();
  std::unique_ptr<TaskPool> own;
  if (pool == nullptr && fits.size() > kGzipChunkBytes) {
    own = MakeTaskPool(workers - 1, "spexd-gzip");
    pool = own.get();
  }
  return GzipCompress(fits, pool, workers);
}

absl::StatusOr<std::string> FitsBytesForPath(const std::string& path, std::string fits) {
  if (!IsGzipName(path)) return fits;
  return GzipFitsBytes(fits);
}

absl::Status WriteFitsAtomically(const std::string& path, const std::string& fits,
                                 int gzip_threads) {
  if (!IsGzipName(path)) return WriteFileAtomically(path, fits);
  SPEXD_ASSIGN_OR_RETURN(std::string gz, GzipFitsBytes(fits, nullptr, gzip_threads));
  return WriteFileAtomically(path, gz);
}

}  // namespace spexd::core
