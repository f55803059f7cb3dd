#include "core/io/fits_gunzip.h"

// The inflation side of reading a .fits.gz (ISA-L, in steps, core/io/internal/gzip.h
// GzipDecoder); what is checked of the FITS content is core/io/internal/fits_stream_check.h.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/internal/fits_stream_check.h"
#include "core/io/internal/gzip.h"

namespace spexd::core {
namespace {

constexpr std::size_t kBlock = kFitsBlock;
// Above this ratio of ISIZE to compressed bytes the trailer is not believed for the
// block's size. Preproc frames compress 1.2-3x, up to ~14x where most pixels are 0.
constexpr int64_t kMaxClaimRatio = 16;
// Output per step: the first small (a stream that is not FITS is refused after it, having
// cost no more), then up to 4 MiB (~7 ms of one core) between checks and polls.
constexpr std::size_t kFirstStep = std::size_t{64} << 10;
// The most output held before the primary header has passed: the longest header allowed,
// one record past it (where the check refuses it) and a step.
constexpr std::size_t kMaxHead =
    static_cast<std::size_t>(internal::kMaxHeaderRecords + 1) * kFitsBlock + kFirstStep;
constexpr std::size_t kStep = std::size_t{4} << 20;
// Output per step of a dropped HDU's data (inflated into a scratch buffer this size).
constexpr std::size_t kSkipStep = std::size_t{1} << 20;
// Compressed bytes read from a descriptor at a time.
constexpr std::size_t kReadPiece = std::size_t{4} << 20;

std::size_t RoundUpToBlock(std::size_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

// Memory an inflation needs only while it runs: from `pool` (InflateBuffers::work), taken
// at its full size at once and never zeroed, or, without a pool, a vector grown as needed
// (what a bounded-heap caller such as the fuzzer sees).
class WorkBuffer {
 public:
  explicit WorkBuffer(PlaneBufferPool* pool) : pool_(pool) {}
  // At least `bytes` (`pooled_bytes` from a pool), keeping what it holds.
  void Resize(std::size_t bytes, std::size_t pooled_bytes) {
    if (size() >= bytes) return;
    if (pool_ == nullptr) {
      own_.resize(bytes);
      return;
    }
    PlaneBuffer<char> next = PlaneBuffer<char>::Make(std::max(bytes, pooled_bytes), pool_);
    if (!pooled_.empty()) std::memcpy(next.data(), pooled_.data(), pooled_.size());
    pooled_ = std::move(next);
  }
  char* data() { return pool_ != nullptr ? pooled_.data() : own_.data(); }
  const char* data() const { return pool_ != nullptr ? pooled_.data() : own_.data(); }
  std::size_t size() const { return pool_ != nullptr ? pooled_.size() : own_.size(); }
  bool empty() const { return size() == 0; }
  void Free() {
    pooled_.Release();
    std::vector<char>().swap(own_);
  }

 private:
  PlaneBufferPool* const pool_;
  PlaneBuffer<char> pooled_;
  std::vector<char> own_;
};

// One .fits.gz being inflated: the gzip decoder, the header check, and the block the FITS
// file is inflated into, taken once the primary header has been checked.
class FitsInflation {
 public:
  FitsInflation(const std::string& name, const FitsSizeLimits& limits, const StopFn& stop,
                const InflateBuffers& buffers, const HduHeaderCheck& hdu_check, int64_t gz_bytes,
                uint32_t isize)
      : name_(name), limits_(limits), stop_(stop), buffers_(buffers.file), head_(buffers.work),
        scratch_(buffers.work), decoder_(name),
        check_(name, limits, hdu_check), claim_(WholeInflateCapacity(gz_bytes, isize, limits)),
        gz_bytes_(gz_bytes),
        // Room for a file at the limit and one block more, so that output past the
        // limit is seen (and refused) rather than left undecoded.
        max_block_(RoundUpToBlock(static_cast<std::size_t>(limits.max_file_bytes)) + kBlock) {}

  // Inflates all of `input`, checking and polling between steps.
  absl::Status Feed(absl::string_view input) {
    while (!input.empty()) {
      if (stop_ && stop_()) return absl::CancelledError(absl::StrCat(name_, ": decompression stopped"));
      if (skip_ > 0) {
        // The data of an HDU the check dropped: inflated (the CRC-32 is checked), counted,
        // not held.
        scratch_.Resize(kSkipStep, kSkipStep);
        const std::size_t before = input.size();
        SPEXD_ASSIGN_OR_RETURN(const std::size_t n,
                               decoder_.Decode(&input, scratch_.data(), std::min(kSkipStep, skip_)));
        SPEXD_RETURN_IF_ERROR(Count(n));
        if (n == 0 && input.size() == before) return Stalled();
        skip_ -= n;
        skip_min_ -= std::min(skip_min_, n);
        continue;
      }
      if (check_.trailing()) {
        // After the last HDU: inflated (the CRC-32 is checked), counted, dropped.
        scratch_.Resize(kFirstStep, kSkipStep);
        const std::size_t before = input.size();
        SPEXD_ASSIGN_OR_RETURN(const std::size_t n,
                               decoder_.Decode(&input, scratch_.data(), scratch_.size()));
        SPEXD_RETURN_IF_ERROR(Count(n));
        if (n == 0 && input.size() == before) return Stalled();
        continue;
      }
      char* out = nullptr;
      std::size_t room = 0;
      if (block_.empty()) {
        // Until the primary header has passed: into a buffer of its own, 64 KiB (a stream
        // that is not FITS is refused within it), then as long as the longest header
        // allowed and a step more (the header check refuses a longer one).
        if (size_ >= kMaxHead) {  // the header check refuses such a header first
          return absl::InternalError(absl::StrCat(name_, ": primary header longer than allowed"));
        }
        const std::size_t limit = size_ < kFirstStep ? kFirstStep : kMaxHead;
        head_.Resize(limit, kMaxHead);
        out = head_.data() + size_;
        room = limit - size_;
      } else {
        if (block_.size() - size_ < kBlock) SPEXD_RETURN_IF_ERROR(Grow());
        out = block_.data() + size_;
        room = std::min(kStep, block_.size() - size_);
      }
      const std::size_t before = input.size();
      SPEXD_ASSIGN_OR_RETURN(const std::size_t n, decoder_.Decode(&input, out, room));
      SPEXD_RETURN_IF_ERROR(Count(n));
      if (n == 0 && input.size() == before) return Stalled();
      size_ += n;
      SPEXD_RETURN_IF_ERROR(check_.Advance(view()));
      SPEXD_RETURN_IF_ERROR(RemoveDropped());
      if (check_.trailing()) size_ = check_.parsed();
      if (block_.empty() && check_.primary_passed() && !check_.trailing()) {
        SPEXD_RETURN_IF_ERROR(TakeBlock());
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<InflatedFits> Finish() {
    SPEXD_RETURN_IF_ERROR(decoder_.Finish());
    if (skip_min_ > 0) {  // a dropped HDU's data end early (its padding alone may lack)
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": truncated FITS file inside the gzip data"));
    }
    if (stop_ && stop_()) return absl::CancelledError(absl::StrCat(name_, ": decompression stopped"));
    SPEXD_ASSIGN_OR_RETURN(const std::size_t size, check_.FinishInPlace(size_));
    if (block_.empty()) SPEXD_RETURN_IF_ERROR(TakeBlock());
    InflatedFits fits;
    block_.Shrink(size);
    fits.block = std::move(block_);
    return fits;
  }

 private:
  absl::string_view view() const {
    return block_.empty() ? absl::string_view(head_.data(), size_) : absl::string_view(block_.data(), size_);
  }

  char* data() { return block_.empty() ? head_.data() : block_.data(); }

  // Takes the HDUs the check dropped out of the output: the bytes of one already inflated
  // now, the rest of its data as they inflate (skip_).
  absl::Status RemoveDropped() {
    while (check_.drop_pending()) {
      const std::size_t from = check_.drop_from(), data_at = check_.drop_data();
      const auto bytes = static_cast<std::size_t>(check_.drop_bytes());
      const std::size_t have = size_ - data_at;  // its data, and maybe more, inflated already
      if (have >= bytes) {
        std::memmove(data() + from, data() + data_at + bytes, have - bytes);
        size_ = from + (have - bytes);
      } else {
        size_ = from;
        skip_ = bytes - have;
        const auto min_bytes = static_cast<std::size_t>(check_.drop_min_bytes());
        skip_min_ = min_bytes > have ? min_bytes - have : 0;
      }
      check_.Dropped();
      SPEXD_RETURN_IF_ERROR(check_.Advance(view()));  // headers inflated after it
    }
    return absl::OkStatus();
  }

  // The decoder took nothing and gave nothing with room to write: never expected of ISA-L
  // (it buffers a partial header), refused rather than looped on.
  absl::Status Stalled() const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": corrupt gzip data (inflate stalled)"));
  }

  absl::Status Count(std::size_t n) {
    inflated_ += static_cast<int64_t>(n);
    if (inflated_ > limits_.max_file_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          name_, ": inflates to more than ", limits_.max_file_bytes,
          " bytes, the limit for a decompressed FITS file"));
    }
    return absl::OkStatus();
  }

  // A block of `bytes` (whole FITS blocks: the memory file CFITSIO reads is padded to
  // them, FitsFile::OpenMemory) holding the output so far; not zero-filled.
  absl::Status Replace(std::size_t bytes) {
    PlaneBuffer<char> next;
    try {
      next = PlaneBuffer<char>::Make(RoundUpToBlock(bytes), buffers_);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name_, ": out of memory for its ", bytes, " inflated bytes"));
    }
    const absl::string_view have = view();
    std::memcpy(next.data(), have.data(), have.size());
    block_ = std::move(next);
    return absl::OkStatus();
  }

  // The block for the whole file: the trailer's plausible claim (and a block more, where
  // the trailer is read), else a guess from the compressed size.
  absl::Status TakeBlock() {
    std::size_t bytes = claim_ > 0 ? static_cast<std::size_t>(claim_) + kBlock
                                   : static_cast<std::size_t>(std::max<int64_t>(4 * gz_bytes_, 1 << 20));
    bytes = std::min(std::max(bytes, size_ + kBlock), max_block_);
    SPEXD_RETURN_IF_ERROR(Replace(bytes));
    head_.Free();  // up to the longest header allowed: not held on
    return absl::OkStatus();
  }

  // Full: twice the size, within the limit (a lying trailer, or several members).
  absl::Status Grow() {
    const std::size_t bytes = std::min(max_block_, std::max(2 * block_.size(), size_ + kStep));
    if (bytes <= block_.size()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          name_, ": inflates to more than ", limits_.max_file_bytes,
          " bytes, the limit for a decompressed FITS file"));
    }
    return Replace(bytes);
  }

  const std::string& name_;
  const FitsSizeLimits& limits_;
  const StopFn& stop_;
  PlaneBufferPool* buffers_;  // the file's block's
  WorkBuffer head_, scratch_;
  GzipDecoder decoder_;
  FitsStreamCheck check_;
  const int64_t claim_, gz_bytes_;
  const std::size_t max_block_;
  PlaneBuffer<char> block_;
  std::size_t size_ = 0;  // bytes of the FITS file inflated so far (in head_ or block_)
  std::size_t skip_ = 0, skip_min_ = 0;  // of a dropped HDU's data still to come (unpadded)
  int64_t inflated_ = 0;  // all bytes inflated, after the file's end too
};

absl::StatusOr<std::string> ToString(absl::StatusOr<InflatedFits> fits) {
  if (!fits.ok()) return fits.status();
  if (fits->block.empty()) return std::move(fits->bytes);
  return std::string(fits->view());
}

}  // namespace

int64_t WholeInflateCapacity(int64_t gz_bytes, uint32_t isize, const FitsSizeLimits& limits) {
  const auto size = static_cast<int64_t>(isize);
  if (size < static_cast<int64_t>(kBlock) || size > limits.max_file_bytes ||
      size / kMaxClaimRatio > gz_bytes) {
    return 0;
  }
  return size;
}

absl::StatusOr<InflatedFits> InflateFits(absl::string_view gz, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop,
                                         const InflateBuffers& buffers,
                                         const HduHeaderCheck& hdu_check) {
  FitsInflation inflation(name, limits, stop, buffers, hdu_check, static_cast<int64_t>(gz.size()),
                          GzipTrailerSize(gz));
  SPEXD_RETURN_IF_ERROR(inflation.Feed(gz));
  return inflation.Finish();
}

absl::StatusOr<std::string> GunzipFits(absl::string_view gz, const std::string& name,
                                       const FitsSizeLimits& limits, const StopFn& stop) {
  return ToString(InflateFits(gz, name, limits, stop, nullptr));
}

absl::StatusOr<InflatedFits> InflateFitsFd(int fd, const std::string& name,
                                           const FitsSizeLimits& limits, const StopFn& stop,
                                           const InflateBuffers& buffers,
                                           const HduHeaderCheck& hdu_check) {
  const off_t start = lseek(fd, 0, SEEK_CUR), end = lseek(fd, 0, SEEK_END);
  uint32_t isize = 0;
  char tail[4];
  if (start >= 0 && end >= start + 4 && pread(fd, tail, 4, end - 4) == 4) {
    isize = GzipTrailerSize(absl::string_view(tail, 4));
  }
  if (start >= 0) lseek(fd, start, SEEK_SET);
  const int64_t gz_bytes = start >= 0 && end >= start ? end - start : 0;
  FitsInflation inflation(name, limits, stop, buffers, hdu_check, gz_bytes, isize);
  WorkBuffer buf(buffers.work);
  buf.Resize(kReadPiece, kReadPiece);
  for (;;) {
    const ssize_t n = read(fd, buf.data(), kReadPiece);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(absl::StrCat(name, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;
    SPEXD_RETURN_IF_ERROR(inflation.Feed(absl::string_view(buf.data(), static_cast<std::size_t>(n))));
  }
  return inflation.Finish();
}

absl::StatusOr<std::string> GunzipFitsFd(int fd, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop) {
  return ToString(InflateFitsFd(fd, name, limits, stop, nullptr));
}

bool HduHeaderFacts::Named(absl::string_view name) const {
  return absl::EqualsIgnoreCase(extname, name) || absl::EqualsIgnoreCase(hduname, name);
}

bool FileIsGzip(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char magic[2];
  const bool gz = pread(fd, magic, 2, 0) == 2 && IsGzip(absl::string_view(magic, 2));
  close(fd);
  return gz;
}

}  // namespace spexd::core
