#include "core/io/fits_gunzip.h"

// The inflation side of reading a .fits.gz (one call with libdeflate, or in steps with
// zlib); what is checked of the FITS content is core/io/internal/fits_stream_check.h.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/internal/fits_stream_check.h"
#include "core/io/internal/gzip.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

constexpr std::size_t kBlock = kFitsBlock;
// Above this ratio of ISIZE to compressed bytes a stream is inflated in steps, each header
// checked before its data (a gzip bomb is refused after a few KB), rather than in one call
// into a buffer of ISIZE bytes. Preproc frames and PSFs compress 1.2-3x; data that
// compress better are mostly runs, which zlib inflates quickly anyway.
constexpr int64_t kMaxWholeInflateRatio = 16;

// Bytes for a FITS file of up to `bytes`, rounded up to whole FITS blocks (the memory file
// CFITSIO reads is padded to them: FitsFile::OpenMemory), uninitialised; false when out of
// memory.
bool TakeBlock(std::size_t bytes, PlaneBufferPool* buffers, PlaneBuffer<char>* block) {
  try {
    *block = PlaneBuffer<char>::Make((bytes + kBlock - 1) / kBlock * kBlock, buffers);
  } catch (const std::bad_alloc&) {
    return false;
  }
  block->Shrink(bytes);
  return true;
}

// `gz` inflated into a block of `capacity` bytes in one call per member (not zero-filled:
// libdeflate, or the parallel inflation on `pool`, writes every byte it reports).
absl::StatusOr<PlaneBuffer<char>> InflateWhole(absl::string_view gz, int64_t capacity,
                                               const std::string& name, const StopFn& stop,
                                               PlaneBufferPool* buffers, TaskPool* pool,
                                               InflateShare* share) {
  internal::ParallelInflateOptions parallel;
  parallel.pool = pool;
  parallel.max_threads = pool != nullptr ? pool->num_threads() + 1 : 1;
  std::optional<InflateShare::Claim> claim;
  if (pool != nullptr && share != nullptr) {
    claim.emplace(share->Enter(parallel.max_threads));
    parallel.max_threads = claim->threads();
  }
  parallel.buffers = buffers;
  PlaneBuffer<char> out;
  if (!TakeBlock(static_cast<std::size_t>(capacity), buffers, &out)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name, ": out of memory for its ", capacity, " inflated bytes"));
  }
  SPEXD_ASSIGN_OR_RETURN(const std::size_t size,
                         InflateGzipInto(gz, out.data(), out.size(), name, stop, parallel));
  out.Shrink(size);
  return out;
}

// Up to `block->size()` bytes of `fd` from `start`, in pieces on `pool` for a large file (the
// page cache's copy, ~25 ms of one core for a 110 MB frame, otherwise sits on the
// request's path before the inflation can start); stops at the first short piece (end of
// file). Returns the bytes read.
absl::StatusOr<std::size_t> ReadWhole(int fd, off_t start, PlaneBuffer<char>* block,
                                      const std::string& name, TaskPool* pool) {
  constexpr std::size_t kPiece = std::size_t{8} << 20;
  const std::size_t size = block->size();
  const int pieces = static_cast<int>(std::max<std::size_t>(1, (size + kPiece - 1) / kPiece));
  std::vector<std::size_t> got(static_cast<std::size_t>(pieces), 0);
  std::vector<int> error(static_cast<std::size_t>(pieces), 0);
  ParallelFor(pool, HardwareThreads(), pieces, [&](int, int p) {
    const std::size_t begin = static_cast<std::size_t>(p) * kPiece;
    const std::size_t end = std::min(size, begin + kPiece);
    std::size_t& n_got = got[static_cast<std::size_t>(p)];
    while (begin + n_got < end) {
      const ssize_t n = pread(fd, block->data() + begin + n_got, end - begin - n_got,
                              start + static_cast<off_t>(begin + n_got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error[static_cast<std::size_t>(p)] = errno;
      if (n <= 0) break;
      n_got += static_cast<std::size_t>(n);
    }
  });
  std::size_t total = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (error[i] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": read failed: ", std::strerror(error[i])));
    }
    total += got[i];
    if (total < std::min(size, (i + 1) * kPiece)) break;  // end of file: it shrank meanwhile
  }
  return total;
}

absl::StatusOr<std::string> GunzipInSteps(absl::string_view gz, const std::string& name,
                                          const FitsSizeLimits& limits, const StopFn& stop) {
  FitsStreamCheck check(name, limits, stop);
  check.Reserve(GzipTrailerSize(gz));
  GzipInflater inflater(name, [&](absl::string_view piece) { return check.Add(piece); });
  SPEXD_RETURN_IF_ERROR(inflater.Feed(gz));
  SPEXD_RETURN_IF_ERROR(inflater.Finish());
  return check.Finish();
}

absl::StatusOr<std::string> ToString(absl::StatusOr<InflatedFits> fits) {
  if (!fits.ok()) return fits.status();
  if (fits->block.empty()) return std::move(fits->bytes);
  return std::string(fits->view());
}

}  // namespace

int64_t WholeInflateCapacity(int64_t gz_bytes, uint32_t isize, const FitsSizeLimits& limits) {
  const auto size = static_cast<int64_t>(isize);
  if (size < static_cast<int64_t>(kBlock) || size > limits.max_file_bytes ||
      gz_bytes > limits.max_file_bytes || size / kMaxWholeInflateRatio > gz_bytes) {
    return 0;
  }
  return size;
}

absl::StatusOr<InflatedFits> InflateFits(absl::string_view gz, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop,
                                         PlaneBufferPool* buffers, TaskPool* pool,
                                         InflateShare* share) {
  const int64_t capacity =
      WholeInflateCapacity(static_cast<int64_t>(gz.size()), GzipTrailerSize(gz), limits);
  InflatedFits fits;
  if (capacity > 0) {
    absl::StatusOr<PlaneBuffer<char>> whole =
        InflateWhole(gz, capacity, name, stop, buffers, pool, share);
    if (whole.ok()) {
      if (stop && stop()) return absl::CancelledError(absl::StrCat(name, ": decompression stopped"));
      FitsStreamCheck check(name, limits, stop);
      SPEXD_ASSIGN_OR_RETURN(const std::size_t size,
                             check.CheckWhole(absl::string_view(whole->data(), whole->size())));
      whole->Shrink(size);
      fits.block = *std::move(whole);
      return fits;
    }
    if (whole.status().code() == absl::StatusCode::kCancelled ||
        whole.status().code() == absl::StatusCode::kResourceExhausted) {
      return whole.status();  // stopped, or out of memory (the steps would need it too)
    }
    // A lying ISIZE (OUT_OF_RANGE or a mismatch), more members than the last one's ISIZE
    // holds, or bad data: inflated in steps, which checks each header before its data
    // and tells corrupt from truncated data.
  }
  SPEXD_ASSIGN_OR_RETURN(fits.bytes, GunzipInSteps(gz, name, limits, stop));
  return fits;
}

absl::StatusOr<std::string> GunzipFits(absl::string_view gz, const std::string& name,
                                       const FitsSizeLimits& limits, const StopFn& stop) {
  return ToString(InflateFits(gz, name, limits, stop, nullptr));
}

absl::StatusOr<InflatedFits> InflateFitsFd(int fd, const std::string& name,
                                           const FitsSizeLimits& limits, const StopFn& stop,
                                           PlaneBufferPool* buffers, TaskPool* pool,
                                           InflateShare* share) {
  const off_t start = lseek(fd, 0, SEEK_CUR), end = lseek(fd, 0, SEEK_END);
  uint32_t isize = 0;
  char tail[4];
  if (start >= 0 && end >= start + 4 && pread(fd, tail, 4, end - 4) == 4) {
    isize = GzipTrailerSize(absl::string_view(tail, 4));
  }
  if (start >= 0) lseek(fd, start, SEEK_SET);
  const int64_t gz_bytes = start >= 0 && end >= start ? end - start : 0;
  if (WholeInflateCapacity(gz_bytes, isize, limits) > 0) {
    // Read whole (libdeflate needs all of a member), into a block given back once
    // inflated: from the page cache this is a few per cent of the inflate time. A file
    // that changes meanwhile is judged as read.
    PlaneBuffer<char> gz;
    if (!TakeBlock(static_cast<std::size_t>(gz_bytes), buffers, &gz)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name, ": out of memory for its ", gz_bytes, " compressed bytes"));
    }
    SPEXD_ASSIGN_OR_RETURN(const std::size_t got, ReadWhole(fd, start, &gz, name, pool));
    return InflateFits(absl::string_view(gz.data(), got), name, limits, stop, buffers, pool, share);
  }
  FitsStreamCheck check(name, limits, stop);
  check.Reserve(isize);
  GzipInflater inflater(name, [&](absl::string_view piece) { return check.Add(piece); });
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(absl::StrCat(name, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;
    SPEXD_RETURN_IF_ERROR(inflater.Feed(absl::string_view(buf.data(), static_cast<std::size_t>(n))));
  }
  SPEXD_RETURN_IF_ERROR(inflater.Finish());
  InflatedFits fits;
  SPEXD_ASSIGN_OR_RETURN(fits.bytes, check.Finish());
  return fits;
}

absl::StatusOr<std::string> GunzipFitsFd(int fd, const std::string& name,
                                         const FitsSizeLimits& limits, const StopFn& stop) {
  return ToString(InflateFitsFd(fd, name, limits, stop, nullptr));
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
