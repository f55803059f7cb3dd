#include "core/frame/progressive_frame_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/background_writer.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/base/write_fully.h"
#include "core/frame/internal/fits_checksum.h"
#include "core/frame/internal/frame_scores.h"
#include "core/frame/internal/fits_hdu_assembly.h"
#include "core/frame/internal/frame_hdus.h"
#include "core/frame/internal/progressive_frame_state.h"
#include "core/io/internal/gzip_image.h"

namespace spexd::core {
namespace {

using internal::BuiltHdu;
using internal::FrameHdu;
using internal::HduSource;
using internal::PerBundle;
using internal::Scratch;

constexpr std::size_t kFitsRecord = 2880;  // FITS logical record (FITS 4.0 §3.1)

}  // namespace

absl::Status ProgressiveFrameFile::State::WriteAt(int64_t offset, const char* data, int64_t n) {
  if (!failed.ok()) return failed;
  failed = gz != nullptr       ? gz->Final(offset, n)
           : writer != nullptr ? writer->Add(offset, data, n)
                               : WriteFully(fd, data, static_cast<std::size_t>(n), offset, name);
  return failed;
}

uint32_t ProgressiveFrameFile::State::Encode(std::size_t i, const void* values,
                                             std::size_t count, std::size_t at,
                                             Scratch* scratch, const char** written,
                                             Form form, const uint64_t* word_sum) {
  const HduSource::Encoding enc = sources.hdus[i].encoding;
  char* out = nullptr;
  if (form == Form::kFileBytes && !keep_image) {
    out = const_cast<char*>(static_cast<const char*>(values));  // written from where they are
  } else if (keep_image) {
    out = image.data() + data_offset(i) + at * internal::BytesPerValue(enc);
  } else {
    const std::size_t bytes = count * internal::BytesPerValue(enc);
    if (bytes > scratch->bytes) {  // uninitialised: every byte is encoded before it is written
      scratch->data.reset(new char[bytes]);
      scratch->bytes = bytes;
    }
    out = scratch->data.get();
  }
  *written = out;
  if (form == Form::kFileBytes && word_sum != nullptr) {  // summed where they were made
    if (out != values) std::memcpy(out, values, 4 * count);
    return internal::FoldWordSum(*word_sum);
  }
  constexpr std::size_t kChunk = internal::kEncodeChunkValues;
  const int tasks = static_cast<int>((count + kChunk - 1) / kChunk);
  std::vector<uint32_t> sums(static_cast<std::size_t>(tasks), 0);
  ParallelFor(threads.pool(), threads.workers(), tasks, [&](int, int t) {
    const std::size_t b = static_cast<std::size_t>(t) * kChunk;
    const std::size_t e = std::min(count, b + kChunk);
    const char* bytes = static_cast<const char*>(values) + 4 * b;
    uint32_t& sum = sums[static_cast<std::size_t>(t)];
    switch (form) {
      case Form::kValues:
        sum = internal::EncodeValues(enc, values, b, e, out + b * internal::BytesPerValue(enc));
        break;
      case Form::kFloat32Bytes:
        sum = internal::EncodeFloat32Bytes(bytes, e - b, out + 4 * b);
        break;
      case Form::kFileBytes:
        if (out + 4 * b != bytes) std::memcpy(out + 4 * b, bytes, 4 * (e - b));
        sum = internal::OnesComplementSum(bytes, 4 * (e - b));
        break;
    }
  });
  uint32_t sum = 0;
  for (uint32_t s : sums) sum = internal::OnesComplementAdd(sum, s);
  return sum;
}

ProgressiveFrameFile::ProgressiveFrameFile(std::unique_ptr<State> state) : s_(std::move(state)) {}
ProgressiveFrameFile::~ProgressiveFrameFile() = default;

absl::StatusOr<std::unique_ptr<ProgressiveFrameFile>> ProgressiveFrameFile::Create(
    const FrameFileShape& shape, const FrameMetadata& meta, int fd, std::string name,
    const FitsWriteOptions& options, bool keep_image, bool gzip) {
  if (gzip && !keep_image) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a gzip frame file is compressed from its image in memory"));
  }
  if (shape.nspec <= 0 || shape.nwave <= 0 || shape.ndiag < 0 || shape.specmin < 0 ||
      shape.wave.size() != static_cast<std::size_t>(shape.nwave)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": no frame file of ", shape.nspec, " spectra x ", shape.nwave,
                     " wavelengths (", shape.wave.size(), " given), ", shape.ndiag, " diagonals"));
  }
  auto s = std::make_unique<State>(options);
  s->shape.specmin = shape.specmin;
  s->shape.nspec = shape.nspec;
  s->shape.nwave = shape.nwave;
  s->shape.ndiag = shape.ndiag;
  s->shape.wave = shape.wave;
  s->meta = meta;
  s->fd = fd;
  s->name = std::move(name);
  s->restamp = options.checksum_time.empty();
  s->time = s->restamp ? internal::ChecksumTimeNow() : options.checksum_time;
  // The sources of FrameToFits, minus SCORES (built at Finish, after CHI2PIX: its size
  // moves nothing). The encoded units get their counts here; their values come later.
  s->sources = internal::FrameHduSources(s->shape, s->meta, {});
  const std::size_t bins = static_cast<std::size_t>(shape.nspec) * shape.nwave;
  const std::size_t nhdu = s->sources.hdus.size();
  for (std::size_t i = 0; i < nhdu; ++i) {
    HduSource& h = s->sources.hdus[i];
    if (h.encoding == HduSource::Encoding::kByBuild) continue;
    h.values = nullptr;
    h.count = s->sources.kinds[i] == FrameHdu::kResolution
                  ? bins * static_cast<std::size_t>(2 * shape.ndiag + 1)
                  : bins;
  }
  SPEXD_ASSIGN_OR_RETURN(const int64_t total,
                         internal::BuildHdus(s->sources.hdus, s->time, s->threads.pool(),
                                             s->threads.workers(), &s->built));
  s->keep_image = keep_image;
  s->image_bytes = total;
  s->datasum.assign(nhdu, 0);
  s->built_units.resize(nhdu);
  try {
    if (keep_image) {
      s->image = internal::ImageWithZeroedGaps(s->built, s->sources.hdus, total,
                                               options.image_buffers, s->threads.pool(),
                                               s->threads.workers());
    }
    for (std::size_t i = 0; i < nhdu; ++i) {  // WAVELENGTH, FIBERMAP: final already
      if (s->sources.hdus[i].encoding != HduSource::Encoding::kByBuild) continue;
      BuiltHdu& b = s->built[i];
      char* unit = nullptr;
      if (keep_image) {
        unit = s->image.data() + s->data_offset(i);
      } else {
        s->built_units[i].assign(static_cast<std::size_t>(b.padded_bytes), '\0');
        unit = s->built_units[i].data();
      }
      if (b.data_bytes > 0) s->datasum[i] = internal::DataUnitSum(b, unit);
      b.data.clear();
      b.data.shrink_to_fit();
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(s->name, ": out of memory for the file"));
  }
  if (keep_image && !gzip) {
    s->writer = std::make_unique<BackgroundWriter>(
        fd, s->name, options.write_pool != nullptr ? options.write_pool : s->threads.pool());
  }
  if (gzip) {
    // Headers are final only at Finish (their CHECKSUM/DATASUM), the data before: a chunk
    // of their own each, so that no data chunk waits for Finish.
    std::vector<int64_t> cuts;
    for (std::size_t i = 0; i < nhdu; ++i) {
      cuts.push_back(s->built[i].offset);
      cuts.push_back(s->data_offset(i));
    }
    s->gz = std::make_unique<GzipImage>(absl::string_view(s->image.data(), s->image.size()),
                                        kGzipChunkBytes, std::move(cuts));
    // Final already, so that their chunks need not wait for Finish: WAVELENGTH's and
    // FIBERMAP's data units, every padding.
    for (std::size_t i = 0; i < nhdu; ++i) {
      const int64_t from = s->FinalFromCreate(i);
      SPEXD_RETURN_IF_ERROR(
          s->gz->Final(s->data_offset(i) + from, s->built[i].padded_bytes - from));
    }
  }
  s->scores_by_row = meta.scores && !meta.given_scores.has_value();
  s->row_done.assign(static_cast<std::size_t>(shape.nspec), 0);
  s->rows_left = shape.nspec;
  return std::unique_ptr<ProgressiveFrameFile>(new ProgressiveFrameFile(std::move(s)));
}

absl::Status ProgressiveFrameFile::Finish(const Frame& frame,
                                          const std::vector<FrameScore>* given_scores,
                                          bool write_rest) {
  State& s = *s_;
  SPEXD_RETURN_IF_ERROR(s.failed);
  if (s.rows_left != 0) {
    return absl::InternalError(absl::StrCat(s.name, ": ", s.rows_left, " of ", s.shape.nspec,
                                            " rows never written"));
  }
  const std::size_t bins = static_cast<std::size_t>(s.shape.nspec) * s.shape.nwave;
  if (frame.nspec != s.shape.nspec || frame.nwave != s.shape.nwave || frame.mask.size() != bins) {
    return absl::InternalError(absl::StrCat(s.name, ": the frame (", frame.nspec, " x ",
                                            frame.nwave, ") does not fit the file"));
  }
  if (s.restamp) s.time = internal::ChecksumTimeNow();
  const std::vector<FrameScore> scores =
      given_scores != nullptr ? (s.meta.scores ? *given_scores : std::vector<FrameScore>{})
      : s.scores_by_row       ? std::move(s.scores)
                              : internal::ScoresToWrite(frame, s.meta, s.threads.pool(),
                                                        s.threads.workers());
  const std::size_t nhdu = s.sources.hdus.size();
  for (std::size_t i = 0; i < nhdu; ++i) {
    if (s.sources.kinds[i] == FrameHdu::kMask) {
      const char* encoded = nullptr;
      s.datasum[i] = s.Encode(i, frame.mask.data(), frame.mask.size(), 0, &s.finish_scratch, &encoded);
      if (!s.keep_image) {
        SPEXD_RETURN_IF_ERROR(s.WriteAt(s.data_offset(i), encoded, s.built[i].data_bytes));
      }
    }
  }
  // SCORES: built now, after CHI2PIX (its own FrameHduSources entry, as FrameToFits's).
  BuiltHdu scores_hdu;
  uint32_t scores_sum = 0;
  internal::FrameHduList with_scores = internal::FrameHduSources(s.shape, s.meta, scores);
  const bool has_scores = with_scores.kinds.back() == FrameHdu::kScores;
  if (has_scores) {
    try {
      SPEXD_RETURN_IF_ERROR(internal::BuildHdu(with_scores.hdus.back(), s.time, &scores_hdu));
      s.tail.assign(static_cast<std::size_t>(scores_hdu.header_bytes + scores_hdu.padded_bytes),
                    '\0');
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat(s.name, ": out of memory for SCORES"));
    }
    if (scores_hdu.data_bytes > 0) {
      scores_sum = internal::DataUnitSum(scores_hdu, s.tail.data() + scores_hdu.header_bytes);
    }
  }
  // The headers, with their sums (and Finish's time, when it is "now").
  std::vector<absl::Status> status(nhdu + 1);
  std::vector<std::string> headers(s.keep_image ? 0 : nhdu);  // without the image
  ParallelFor(s.threads.pool(), s.threads.workers(), static_cast<int>(nhdu + 1), [&](int, int i) {
    const bool last = static_cast<std::size_t>(i) == nhdu;
    if (last && !has_scores) return;
    BuiltHdu& b = last ? scores_hdu : s.built[static_cast<std::size_t>(i)];
    absl::Status& st = status[static_cast<std::size_t>(i)];
    if (s.restamp && !last) st = b.cards.Restamp(*b.scratch, s.time);
    if (!st.ok()) return;
    absl::StatusOr<std::string> header =
        internal::FinishHeader(b, last ? scores_sum : s.datasum[static_cast<std::size_t>(i)]);
    if (!header.ok()) {
      st = header.status();
    } else if (last || s.keep_image) {
      std::memcpy(last ? s.tail.data() : s.image.data() + b.offset, header->data(), header->size());
    } else {
      headers[static_cast<std::size_t>(i)] = *std::move(header);
    }
    b.scratch.reset();
  });
  for (const absl::Status& st : status) SPEXD_RETURN_IF_ERROR(st);
  // What AddRows did not write: the headers, the other data units, the padding.
  const std::string zeros(kFitsRecord, '\0');  // padding is shorter than a record
  for (std::size_t i = 0; i < nhdu; ++i) {
    const BuiltHdu& b = s.built[i];
    if (s.keep_image) {
      SPEXD_RETURN_IF_ERROR(s.WriteAt(b.offset, s.image.data() + b.offset, b.header_bytes));
      const int64_t from = PerBundle(s.sources.kinds[i]) ? b.data_bytes : 0;
      // gzip: Create declared what was final then (FinalFromCreate on).
      const int64_t to = s.gz != nullptr ? std::max(from, s.FinalFromCreate(i)) : b.padded_bytes;
      const int64_t at = s.data_offset(i) + from;
      SPEXD_RETURN_IF_ERROR(s.WriteAt(at, s.image.data() + at, to - from));
      continue;
    }
    SPEXD_RETURN_IF_ERROR(s.WriteAt(b.offset, headers[i].data(), b.header_bytes));
    if (!s.built_units[i].empty()) {  // WAVELENGTH, FIBERMAP: data and padding
      SPEXD_RETURN_IF_ERROR(s.WriteAt(s.data_offset(i), s.built_units[i].data(), b.padded_bytes));
    } else {  // the rows or MASK are written: their padding
      SPEXD_RETURN_IF_ERROR(s.WriteAt(s.data_offset(i) + b.data_bytes, zeros.data(),
                                      b.padded_bytes - b.data_bytes));
    }
  }
  if (s.gz != nullptr) {
    s.failed = s.gz->Seal(s.tail, s.threads.pool(), s.threads.workers(), s.name);
    if (s.failed.ok() && write_rest) s.failed = s.gz->Write(s.fd, s.name);
    return s.failed;
  }
  SPEXD_RETURN_IF_ERROR(
      s.WriteAt(s.image_bytes, s.tail.data(), static_cast<int64_t>(s.tail.size())));
  return write_rest ? WriteRest() : absl::OkStatus();
}

absl::Status ProgressiveFrameFile::WriteRest() {
  SPEXD_RETURN_IF_ERROR(s_->failed);
  if (s_->gz != nullptr) {
    s_->failed = s_->gz->Write(s_->fd, s_->name);
  } else if (s_->writer != nullptr) {
    s_->failed = s_->writer->Flush();
  }
  return s_->failed;
}

void ProgressiveFrameFile::StopWrites() {
  if (s_->writer == nullptr) return;
  s_->writer.reset();
  if (s_->failed.ok()) {
    s_->failed = absl::CancelledError(absl::StrCat(s_->name, ": writes stopped"));
  }
}

std::vector<absl::string_view> ProgressiveFrameFile::pieces() const {
  if (!s_->keep_image) return {};
  return {absl::string_view(s_->image.data(), s_->image.size()), s_->tail};
}

std::vector<absl::string_view> ProgressiveFrameFile::stored_pieces() const {
  return s_->gz != nullptr ? s_->gz->pieces() : pieces();
}

int ProgressiveFrameFile::gzip_early_chunks() const {
  return s_->gz != nullptr ? s_->gz->early_chunks() : 0;
}

int ProgressiveFrameFile::gzip_late_chunks() const {
  return s_->gz != nullptr ? s_->gz->late_chunks() : 0;
}

int64_t ProgressiveFrameFile::gzip_late_bytes() const {
  return s_->gz != nullptr ? s_->gz->late_bytes() : 0;
}

int64_t ProgressiveFrameFile::size() const {
  return s_->image_bytes + static_cast<int64_t>(s_->tail.size());
}

}  // namespace spexd::core
