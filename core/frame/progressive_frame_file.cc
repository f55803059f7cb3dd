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
#include "core/io/internal/gzip_image.h"

namespace spexd::core {
namespace {

using internal::BuiltHdu;
using internal::FrameHdu;
using internal::HduSource;

constexpr std::size_t kFitsRecord = 2880;  // FITS logical record (FITS 4.0 §3.1)

bool PerBundle(FrameHdu k) {
  return k == FrameHdu::kFlux || k == FrameHdu::kIvar || k == FrameHdu::kResolution ||
         k == FrameHdu::kChi2pix;
}

}  // namespace

// A buffer values are encoded into before they are written, where the image is not kept.
struct Scratch {
  std::unique_ptr<char[]> data;
  std::size_t bytes = 0;
};

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
  std::vector<BuiltHdu> built;
  std::vector<uint32_t> datasum;  // so far, per HDU
  PlaneBuffer<char> image;        // the file up to the end of CHI2PIX (keep_image)
  // Without the image: its size, a buffer the rows are encoded into and written from, and
  // WAVELENGTH's and FIBERMAP's data units (padded), written by Finish.
  bool keep_image = true;
  int64_t image_bytes = 0;
  Scratch finish_scratch;  // Finish's encoding buffer
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
  std::vector<Scratch> spare_scratch;  // AddRows' buffers without the image, for reuse
  // Without the image: one write into the file at a time. The kernel serialises writes to
  // one file on its inode lock anyway, and its waiters spin (3.5 % of a 64-core host's
  // samples with four bundles writing at once; docs/performance.md, "Several GPUs on one
  // host"), where these sleep.
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
    return sources.hdus[i].encoding == HduSource::Encoding::kByBuild ? 0 : built[i].data_bytes;
  }
  std::size_t values_per_row(std::size_t i) const {
    return static_cast<std::size_t>(sources.kinds[i] == FrameHdu::kResolution
                                        ? (2 * shape.ndiag + 1) * shape.nwave
                                        : shape.nwave);
  }
  // Writes (with gz: declares final; with the writer: queues) [offset, offset + n); the
  // first failure sticks. Under mu while AddRows may run.
  absl::Status WriteAt(int64_t offset, const char* data, int64_t n);
  // values [begin, end) of HDU i from `values` into the image at value `at` (or into
  // `scratch`, grown as needed), *out where they went; their sum.
  // `float32_bytes`: `values` are little-endian float32 bytes of a float32 HDU.
  uint32_t Encode(std::size_t i, const void* values, std::size_t count, std::size_t at,
                  Scratch* scratch, const char** out, bool float32_bytes = false);
};

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
                                             bool float32_bytes) {
  const HduSource::Encoding enc = sources.hdus[i].encoding;
  char* out = nullptr;
  if (keep_image) {
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
  constexpr std::size_t kChunk = internal::kEncodeChunkValues;
  const int tasks = static_cast<int>((count + kChunk - 1) / kChunk);
  std::vector<uint32_t> sums(static_cast<std::size_t>(tasks), 0);
  ParallelFor(threads.pool(), threads.workers(), tasks, [&](int, int t) {
    const std::size_t b = static_cast<std::size_t>(t) * kChunk;
    const std::size_t e = std::min(count, b + kChunk);
    sums[static_cast<std::size_t>(t)] =
        float32_bytes ? internal::EncodeFloat32Bytes(static_cast<const char*>(values) + 4 * b,
                                                     e - b, out + 4 * b)
                      : internal::EncodeValues(enc, values, b, e,
                                               out + b * internal::BytesPerValue(enc));
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

absl::Status ProgressiveFrameFile::AddRows(int row, const BundleResult& b) {
  const State& s = *s_;
  const std::size_t bins = static_cast<std::size_t>(std::max(b.nfibers, 0)) * s.shape.nwave;
  const std::size_t nk = static_cast<std::size_t>(2 * s.shape.ndiag + 1);
  if (!b.per_angstrom || b.nwave != s.shape.nwave || b.ndiag != s.shape.ndiag ||
      b.flux.size() != bins || b.ivar.size() != bins || b.chi2pix.size() != bins ||
      b.rdiags.size() != bins * nk) {
    return absl::InternalError(absl::StrCat(s.name, ": bundle ", b.bundle, " (", b.nfibers,
                                            " fibres at row ", row, ") does not fit the file"));
  }
  return AddRowValues(row, {.bundle = b.bundle, .nfibers = b.nfibers, .flux = b.flux.data(),
                           .ivar = b.ivar.data(), .rdiags = b.rdiags.data(),
                           .chi2pix = b.chi2pix.data(), .doubles = &b});
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
    sums[i] = s.Encode(i, values, count, at, &scratch, &encoded, v.float32_bytes);
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
    Frame rows;  // the bundle's rows with the recorded grid: what RawScores reads
    rows.nspec = v.nfibers;
    rows.nwave = s.shape.nwave;
    rows.wave = s.shape.wave;
    rows.flux = v.doubles->flux;
    rows.ivar = v.doubles->ivar;
    part = ComputeRawScores(rows, s.threads.pool(), s.threads.workers());
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
