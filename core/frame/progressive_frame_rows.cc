// ProgressiveFrameFile::AddRows (progressive_frame_file.h): a bundle's rows encoded into
// the image or a scratch buffer, written or queued, their sums and RAW scores kept.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/status_macros.h"
#include "core/base/write_fully.h"
#include "core/frame/internal/fits_checksum.h"
#include "core/frame/internal/frame_scores.h"
#include "core/frame/internal/progressive_frame_state.h"
#include "core/frame/progressive_frame_file.h"

namespace spexd::core {

using internal::FrameHdu;
using internal::PerBundle;
using internal::Scratch;

absl::Status ProgressiveFrameFile::AddRows(int row, const BundleResult& b) {
  const State& s = *s_;
  const std::size_t bins = static_cast<std::size_t>(std::max(b.nfibers, 0)) * s.shape.nwave;
  const std::size_t nk = static_cast<std::size_t>(2 * s.shape.ndiag + 1);
  // RESOLUTION as float64 values, or as the file's bytes (rdiags_file) instead.
  const bool rdiags_file = b.rdiags.empty() && !b.rdiags_file.empty();
  if (!b.per_angstrom || b.nwave != s.shape.nwave || b.ndiag != s.shape.ndiag ||
      b.flux.size() != bins || b.ivar.size() != bins || b.chi2pix.size() != bins ||
      (rdiags_file ? b.rdiags_file.size() != 4 * bins * nk : b.rdiags.size() != bins * nk)) {
    return absl::InternalError(absl::StrCat(s.name, ": bundle ", b.bundle, " (", b.nfibers,
                                            " fibres at row ", row, ") does not fit the file"));
  }
  return AddRowValues(row, {.bundle = b.bundle, .nfibers = b.nfibers, .flux = b.flux.data(),
                           .ivar = b.ivar.data(),
                           .rdiags = rdiags_file ? static_cast<const void*>(b.rdiags_file.data())
                                                 : b.rdiags.data(),
                           .chi2pix = b.chi2pix.data(), .rdiags_file_bytes = rdiags_file,
                           .rdiags_file_word_sum = rdiags_file && b.rdiags_file_word_sum
                                                       ? &*b.rdiags_file_word_sum
                                                       : nullptr,
                           .doubles = &b});
}

absl::Status ProgressiveFrameFile::AddRows(int row, const Float32Rows& r) {
  const State& s = *s_;
  const std::size_t bytes = static_cast<std::size_t>(std::max(r.nfibers, 0)) * s.shape.nwave * 4;
  const std::size_t nk = static_cast<std::size_t>(2 * s.shape.ndiag + 1);
  if (r.flux.size() != bytes || r.ivar.size() != bytes || r.chi2pix.size() != bytes ||
      r.rdiags.size() != bytes * nk) {
    return absl::InternalError(absl::StrCat(s.name, ": float32 rows of bundle ", r.bundle, " (",
                                            r.nfibers, " fibres at row ", row,
                                            ") do not fit the file"));
  }
  if (s.scores_by_row) {
    return absl::InternalError(
        absl::StrCat(s.name, ": float32 rows need the scores given (meta.given_scores)"));
  }
  return AddRowValues(row, {.bundle = r.bundle, .nfibers = r.nfibers, .flux = r.flux.data(),
                           .ivar = r.ivar.data(), .rdiags = r.rdiags.data(),
                           .chi2pix = r.chi2pix.data(), .float32_bytes = true});
}

absl::Status ProgressiveFrameFile::AddRowValues(int row, const RowValues& v) {
  State& s = *s_;
  const std::size_t bins = static_cast<std::size_t>(std::max(v.nfibers, 0)) * s.shape.nwave;
  const std::size_t nk = static_cast<std::size_t>(2 * s.shape.ndiag + 1);
  Scratch scratch;
  {
    absl::MutexLock lock(&s.mu);
    SPEXD_RETURN_IF_ERROR(s.failed);
    if (row < 0 || v.nfibers <= 0 || row + v.nfibers > s.shape.nspec) {
      return absl::InternalError(absl::StrCat(s.name, ": bundle ", v.bundle, " (", v.nfibers,
                                              " fibres at row ", row, ") does not fit the file"));
    }
    for (int r = row; r < row + v.nfibers; ++r) {
      if (s.row_done[static_cast<std::size_t>(r)] != 0) {
        return absl::InternalError(absl::StrCat(s.name, ": row ", r, " written twice"));
      }
    }
    // Taken now, so that a call running beside this one cannot write them too.
    for (int r = row; r < row + v.nfibers; ++r) s.row_done[static_cast<std::size_t>(r)] = 1;
    if (!s.keep_image && !s.spare_scratch.empty()) {
      scratch = std::move(s.spare_scratch.back());
      s.spare_scratch.pop_back();
    }
  }
  // Encoded and written outside the lock: these rows are bytes no other call touches.
  const std::size_t nhdu = s.sources.hdus.size();
  std::vector<uint32_t> sums(nhdu, 0);
  absl::Status written;
  for (std::size_t i = 0; i < nhdu && written.ok(); ++i) {
    const FrameHdu kind = s.sources.kinds[i];
    if (!PerBundle(kind)) continue;
    const void* values = kind == FrameHdu::kFlux      ? v.flux
                         : kind == FrameHdu::kIvar    ? v.ivar
                         : kind == FrameHdu::kChi2pix ? v.chi2pix
                                                      : v.rdiags;
    const std::size_t count = kind == FrameHdu::kResolution ? bins * nk : bins;
    const std::size_t at = static_cast<std::size_t>(row) * s.values_per_row(i);
    const char* encoded = nullptr;
    const State::Form form = v.float32_bytes ? State::Form::kFloat32Bytes
                             : kind == FrameHdu::kResolution && v.rdiags_file_bytes
                                 ? State::Form::kFileBytes
                                 : State::Form::kValues;
    sums[i] = s.Encode(i, values, count, at, &scratch, &encoded, form,
                       form == State::Form::kFileBytes ? v.rdiags_file_word_sum : nullptr);
    const int64_t offset = s.data_offset(i) + static_cast<int64_t>(at * 4);
    const int64_t n = static_cast<int64_t>(count * 4);
    if (s.gz != nullptr) {
      absl::MutexLock lock(&s.mu);
      written = s.WriteAt(offset, encoded, n);
    } else if (s.writer != nullptr) {
      written = s.writer->Add(offset, encoded, n);
    } else {
      {
        absl::MutexLock write_lock(&s.write_mu);
        written = WriteFully(s.fd, encoded, static_cast<std::size_t>(n), offset, s.name);
      }
      if (written.ok()) StartWriteback(s.fd, offset, n);
    }
  }
  std::vector<FrameScore> part;
  if (written.ok() && s.scores_by_row && v.doubles != nullptr) {
    // The bundle's rows in place, on the recorded grid.
    part = ComputeRawScores(v.doubles->flux.data(), v.doubles->ivar.data(), v.nfibers,
                            s.shape.nwave, s.shape.wave, s.threads.pool(), s.threads.workers());
  }
  absl::MutexLock lock(&s.mu);
  if (scratch.data != nullptr) s.spare_scratch.push_back(std::move(scratch));
  if (!written.ok()) {
    if (s.failed.ok()) s.failed = written;
    return s.failed;
  }
  SPEXD_RETURN_IF_ERROR(s.failed);  // another call's write failed meanwhile
  for (std::size_t i = 0; i < nhdu; ++i) {
    if (PerBundle(s.sources.kinds[i])) s.datasum[i] = internal::OnesComplementAdd(s.datasum[i], sums[i]);
  }
  if (!part.empty() && s.scores.empty()) {
    s.scores = part;
    for (FrameScore& c : s.scores) c.values.assign(static_cast<std::size_t>(s.shape.nspec), 0.0);
  }
  for (std::size_t c = 0; c < part.size() && c < s.scores.size(); ++c) {
    std::copy(part[c].values.begin(), part[c].values.end(), s.scores[c].values.begin() + row);
  }
  s.rows_left -= v.nfibers;
  // The chunks these rows completed deflate on the pool's free threads while the next
  // bundle's rows are encoded (deflating them here would serialise them behind the rows).
  if (s.gz != nullptr) s.gz->CompressReady(s.threads.workers() > 1 ? s.threads.pool() : nullptr);
  return absl::OkStatus();
}

}  // namespace spexd::core
