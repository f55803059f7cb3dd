#include "core/io/preproc.h"

#include <fitsio.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "core/io/internal/preproc_checks.h"
#include "core/base/parallel_for.h"
#include "core/numerics/pixel_rules.h"
#include "core/io/internal/plane_decode.h"
#include "core/io/internal/plane_rules.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

using preproc_checks::CheckFloatPlane;
using preproc_checks::CheckPlane;
using preproc_checks::CheckSameShape;
using preproc_checks::MissingHdu;
using preproc_checks::MoveIfPresent;
using preproc_checks::PreprocHduCheck;
using preproc_checks::PrimaryNotImage;

// Where a .fits.gz load inflates: with raw planes, into the planes' pool (page-locked on a
// GPU server), as the planes are then parts of the inflated file (ReadRawPlanes); else into
// the load's. The inflation's work buffers are the load's either way.
InflateBuffers InflatePools(const PreprocOptions& options) {
  return {options.keep_raw ? options.buffers : options.load_buffers, options.load_buffers};
}

template <typename T>
bool IsAligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

// The FIBERMAP table as a standalone FITS file (empty primary + the table), so that the
// output writer can copy it unchanged (spec §5.2, §5.3).
absl::StatusOr<std::string> CopyFibermap(FitsFile& file) {
  int status = 0, hdutype = 0;
  fits_get_hdu_type(file.get(), &hdutype, &status);
  if (status != 0) return file.Error(status, "reading HDU type");
  if (hdutype != BINARY_TBL) return file.Invalid("FIBERMAP is not a binary table");
  SPEXD_RETURN_IF_ERROR(file.CheckHduComplete());
  SPEXD_ASSIGN_OR_RETURN(FitsFile out, FitsFile::CreateMemory(file.name() + "[FIBERMAP]"));
  SPEXD_RETURN_IF_ERROR(file.CopyCurrentHduTo(out));
  return out.TakeMemory();
}

// Pixels tested at once for rules that would change none of them.
// Pixels decoded per plane before the rules go over them: 2 x 256 KiB of float32, in
// cache still.
constexpr int64_t kRulesBlockPixels = int64_t{1} << 16;

// Decodes chunk `c` of IMAGE and IVAR into `image` and `ivar`, block by block, each
// block followed by the rules (with `rules`) while it is in cache.
template <typename T>
absl::Status DecodeChunk(const FitsFile::RawBytes& bytes, const FitsFile::RawFloatImage& raw_image,
                         const FitsFile::RawFloatImage& raw_ivar, int c, T* image, T* ivar,
                         bool rules, uint16_t bad_bits, const uint16_t* mask,
                         std::size_t* n_masked, std::size_t* n_nonfinite) {
  const int64_t lo = int64_t{c} * kDecodeChunkPixels;
  const int64_t hi = std::min(raw_image.pixels, lo + kDecodeChunkPixels);
  for (int64_t p = lo; p < hi; p += kRulesBlockPixels) {
    const int64_t e = std::min(hi, p + kRulesBlockPixels);
    SPEXD_RETURN_IF_ERROR(DecodeRawRange(bytes, raw_image, p, e, image));
    SPEXD_RETURN_IF_ERROR(DecodeRawRange(bytes, raw_ivar, p, e, ivar));
    if (rules) {
      ApplyRulesRange<T>(bad_bits, mask, image, ivar, static_cast<std::size_t>(p),
                         static_cast<std::size_t>(e), n_masked, n_nonfinite);
    }
  }
  return absl::OkStatus();
}

// Large allocations are the one place the reader can throw (std::bad_alloc); convert
// at the module edge (docs/design.md "Conventions").
template <typename Fn>
auto Guarded(const std::string& name, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": out of memory reading preproc"));
  }
}

// A preproc stores IMAGE and IVAR as float32 (extraction-spec §5.1) and a frame file's FLUX
// and IVAR are float32 (§5.2): a finite value beyond float32's range, which only a float64
// or scaled plane can hold, is no preproc value, and would reach the frame as inf without
// a word. Refused, naming the HDU and the first such pixel (row-major).
absl::Status CheckFloat32Range(const std::vector<double>& plane, int width,
                               const std::string& file, const char* hdu, TaskPool* pool) {
  constexpr double kMax = std::numeric_limits<float>::max();
  const int64_t n = static_cast<int64_t>(plane.size());
  const int chunks = DecodeChunks(n);
  std::atomic<int64_t> first{n};
  ParallelFor(pool, HardwareThreads(), chunks, [&](int /*worker*/, int c) {
    const int64_t lo = int64_t{c} * kDecodeChunkPixels, hi = std::min(n, lo + kDecodeChunkPixels);
    bool any = false;
    for (int64_t i = lo; i < hi; ++i) any |= std::fabs(plane[static_cast<std::size_t>(i)]) > kMax;
    if (!any) return;
    for (int64_t i = lo; i < hi; ++i) {
      const double v = plane[static_cast<std::size_t>(i)];
      if (std::fabs(v) > kMax && std::isfinite(v)) {
        int64_t seen = first.load();
        while (i < seen && !first.compare_exchange_weak(seen, i)) {
        }
        return;
      }
    }
  });
  const int64_t at = first.load();
  if (at == n) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s[%s]: pixel (y %d, x %d) = %g is beyond float32's range (largest %g): a preproc "
      "stores %s as float32 (extraction-spec section 5.1), and the frame's float32 FLUX and "
      "IVAR would hold inf",
      file, hdu, at / width, at % width, plane[static_cast<std::size_t>(at)], kMax, hdu));
}

}  // namespace

absl::Status PreprocReader::Stopped() const {
  if (stop_ && stop_()) return absl::CancelledError(absl::StrCat(file_.name(), ": reading stopped"));
  return absl::OkStatus();
}

absl::Status PreprocReader::CheckHeaders() {
  FitsFile& file = file_;
  const int64_t max_pixels = limits_.max_image_pixels;
  SPEXD_ASSIGN_OR_RETURN(bool has_image, MoveIfPresent(file, "IMAGE"));
  int image_hdu = 0;
  if (has_image) fits_get_hdu_num(file.get(), &image_hdu);
  if (has_image && image_hdu != 1) {  // as PreprocHduCheck judges a .fits.gz's primary header
    SPEXD_RETURN_IF_ERROR(file.MoveToHduIndex(0));
    int status = 0;
    LONGLONG head = 0, data = 0, end = 0;
    fits_get_hduaddrll(file.get(), &head, &data, &end, &status);
    if (status != 0) return file.Error(status, "reading the primary HDU's layout");
    if (end > data) {
      SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo primary, file.GetImageInfo());
      std::vector<int64_t> axes(primary.naxes.begin(), primary.naxes.end());
      return file.Invalid(PrimaryNotImage(axes));
    }
    SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IMAGE"));
  }
  if (!has_image) return MissingHdu(file, "IMAGE");
  SPEXD_ASSIGN_OR_RETURN(image_info_, CheckPlane(file, max_pixels));
  SPEXD_RETURN_IF_ERROR(CheckFloatPlane(file, image_info_));

  SPEXD_ASSIGN_OR_RETURN(bool has_ivar, MoveIfPresent(file, "IVAR"));
  if (!has_ivar) return MissingHdu(file, "IVAR");
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo ivar_info, CheckPlane(file, max_pixels));
  SPEXD_RETURN_IF_ERROR(CheckSameShape(file, "IVAR", ivar_info, image_info_));
  SPEXD_RETURN_IF_ERROR(CheckFloatPlane(file, ivar_info));

  SPEXD_ASSIGN_OR_RETURN(has_mask_, MoveIfPresent(file, "MASK"));
  if (has_mask_) {
    SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo mask_info, CheckPlane(file, max_pixels));
    SPEXD_RETURN_IF_ERROR(CheckSameShape(file, "MASK", mask_info, image_info_));
  }

  SPEXD_ASSIGN_OR_RETURN(has_fibermap_, MoveIfPresent(file, "FIBERMAP"));
  if (!has_fibermap_ && options_.require_fibermap) return MissingHdu(file, "FIBERMAP");
  return absl::OkStatus();
}

absl::Status PreprocReader::ReadFibermap(PreprocImage* frame) {
  if (!has_fibermap_) return absl::OkStatus();
  SPEXD_RETURN_IF_ERROR(file_.MoveToHdu("FIBERMAP"));
  SPEXD_ASSIGN_OR_RETURN(frame->fibermap_fits, CopyFibermap(file_));
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::vector<std::string>, std::string>> PreprocReader::Headers() {
  std::pair<std::vector<std::string>, std::string> out;
  SPEXD_RETURN_IF_ERROR(file_.MoveToHdu("IMAGE"));
  SPEXD_ASSIGN_OR_RETURN(out.first, file_.ReadUserCards());
  if (has_fibermap_) {
    SPEXD_RETURN_IF_ERROR(file_.MoveToHdu("FIBERMAP"));
    SPEXD_ASSIGN_OR_RETURN(out.second, CopyFibermap(file_));
  }
  return out;
}

absl::StatusOr<std::string> ReadFibermapFile(const std::string& path) {
  SPEXD_ASSIGN_OR_RETURN(FitsFile file, FitsFile::OpenRead(path));
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("FIBERMAP"));
  return CopyFibermap(file);
}

absl::Status CheckFibermapRows(const std::string& fibermap_fits, int64_t specmin, int64_t nspec) {
  auto file = FitsFile::OpenMemory(fibermap_fits.data(), fibermap_fits.size(), "fibermap");
  if (!file.ok() || !file->MoveToHdu("FIBERMAP").ok()) {
    return absl::InvalidArgumentError("the fibermap is not a FITS file with a FIBERMAP HDU");
  }
  int status = 0, hdutype = 0;
  long nrows = 0;
  fits_get_hdu_type(file->get(), &hdutype, &status);
  if (status == 0 && hdutype != BINARY_TBL) {
    return absl::InvalidArgumentError("the fibermap's FIBERMAP HDU is not a binary table");
  }
  fits_get_num_rows(file->get(), &nrows, &status);
  if (status != 0) {
    return absl::InvalidArgumentError(file->Error(status, "reading FIBERMAP rows").message());
  }
  if (specmin + nspec > nrows) {
    return absl::InvalidArgumentError(absl::StrCat("FIBERMAP has ", nrows,
                                                   " rows: none for fibre ", specmin + nspec - 1,
                                                   " (a row per fibre up to the last extracted)"));
  }
  return absl::OkStatus();
}

// Over 100 lines: a plain file's planes are decoded in one parallel pass, task 0 reading
// MASK and FIBERMAP on the CFITSIO handle while the others decode chunks and apply the
// pixel rules while each is in cache; the tasks share the chunk bookkeeping (mask_ready,
// ruled, the counts), which split functions would only pass around.
absl::StatusOr<PreprocImage> PreprocReader::ReadPlanes() {
  FitsFile& file = file_;
  PreprocImage frame;
  frame.source_name = file.name();
  frame.width = width();
  frame.height = height();
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IMAGE"));
  SPEXD_ASSIGN_OR_RETURN(frame.image_header, file.ReadUserCards());
  SPEXD_ASSIGN_OR_RETURN(std::optional<FitsFile::RawFloatImage> raw_image, file.GetRawFloatImage());
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IVAR"));
  SPEXD_ASSIGN_OR_RETURN(std::optional<FitsFile::RawFloatImage> raw_ivar, file.GetRawFloatImage());
  PlaneBuffer<uint16_t> mask;
  if (raw_image.has_value() && raw_ivar.has_value()) {
    // Plain float planes (every preproc file desispec writes): decoded here in chunks on
    // the pool while this thread, the only one using the CFITSIO handle, reads MASK and
    // FIBERMAP.
    float32_values_ = raw_image->bitpix == FLOAT_IMG && raw_ivar->bitpix == FLOAT_IMG;
    if (options_.keep_raw && float32_values_) {
      SPEXD_RETURN_IF_ERROR(ReadRawPlanes(*raw_image, *raw_ivar, &frame));
      return frame;
    }
    const bool float32 = options_.keep_float32 && float32_values_;
    const std::size_t n = static_cast<std::size_t>(raw_image->pixels);
    if (float32) {
      frame.image32 = PlaneBuffer<float>::Make(n, options_.buffers);
      frame.ivar32 = PlaneBuffer<float>::Make(n, options_.buffers);
    } else {
      frame.image.resize(n);
      frame.ivar.resize(n);
    }
    SPEXD_ASSIGN_OR_RETURN(FitsFile::RawBytes bytes, file.OpenRawBytes());
    const int chunks = DecodeChunks(raw_image->pixels);
    const uint16_t bad_bits = MaskBadBits(options_.mask_policy);
    // The pixel rules are applied to each chunk as it is decoded, while it is in cache,
    // once the mask is there; chunks decoded before that get them afterwards.
    std::atomic<bool> mask_ready{!has_mask_};
    std::vector<char> ruled(static_cast<std::size_t>(chunks), 0);  // each set by its chunk's task
    std::atomic<std::size_t> n_masked{0}, n_nonfinite{0};
    absl::Mutex mu;
    absl::Status decode;
    // Task 0 is MASK and FIBERMAP, on the CFITSIO handle (used by this task alone), taken
    // first (by this thread, unless a pool thread is quicker); the others are chunks of
    // the two planes.
    absl::Status side;
    auto task = [&](int /*worker*/, int t) {
      if (t == 0) {
        side = ReadMask(options_.load_buffers, &mask);
        if (!side.ok()) return;
        mask_ready.store(true, std::memory_order_release);
        side = ReadFibermap(&frame);
        return;
      }
      const int c = t - 1;
      const bool rules = mask_ready.load(std::memory_order_acquire);
      const uint16_t* bits = rules ? mask.data() : nullptr;  // task 0 may be writing `mask`
      std::size_t masked = 0, nonfinite = 0;
      absl::Status st =
          float32 ? DecodeChunk(bytes, *raw_image, *raw_ivar, c, frame.image32.data(),
                                frame.ivar32.data(), rules, bad_bits, bits, &masked, &nonfinite)
                  : DecodeChunk(bytes, *raw_image, *raw_ivar, c, frame.image.data(),
                                frame.ivar.data(), rules, bad_bits, bits, &masked, &nonfinite);
      if (!st.ok()) {
        absl::MutexLock lock(&mu);
        if (decode.ok()) decode = std::move(st);
        return;
      }
      ruled[static_cast<std::size_t>(c)] = rules ? 1 : 0;
      n_masked += masked;
      n_nonfinite += nonfinite;
    };
    ParallelFor(options_.pool, HardwareThreads(), 1 + chunks, task);
    SPEXD_RETURN_IF_ERROR(side);
    SPEXD_RETURN_IF_ERROR(decode);
    SPEXD_RETURN_IF_ERROR(Stopped());
    std::vector<int> left;
    for (int c = 0; c < chunks; ++c) {
      if (ruled[static_cast<std::size_t>(c)] == 0) left.push_back(c);
    }
    ParallelFor(options_.pool, HardwareThreads(), static_cast<int>(left.size()),
                [&](int /*worker*/, int i) {
                  std::size_t masked = 0, nonfinite = 0;
                  if (float32) {
                    ApplyRulesChunk(bad_bits, mask.data(), frame.image32.data(),
                                    frame.ivar32.data(), n, left[static_cast<std::size_t>(i)],
                                    &masked, &nonfinite);
                  } else {
                    ApplyRulesChunk(bad_bits, mask.data(), frame.image.data(), frame.ivar.data(),
                                    n, left[static_cast<std::size_t>(i)], &masked, &nonfinite);
                  }
                  n_masked += masked;
                  n_nonfinite += nonfinite;
                });
    frame.n_masked = n_masked.load();
    frame.n_nonfinite = n_nonfinite.load();
    return frame;
  } else {
    // Anything else (float64 with scaling, tile-compressed planes): CFITSIO converts to
    // float64 while reading (exact for float32, spec §2.1), decompresses tiles and applies
    // BSCALE/BZERO.
    SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IMAGE"));
    SPEXD_ASSIGN_OR_RETURN(frame.image, file.ReadImage<double>());
    SPEXD_RETURN_IF_ERROR(Stopped());
    SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IVAR"));
    SPEXD_ASSIGN_OR_RETURN(frame.ivar, file.ReadImage<double>());
    SPEXD_RETURN_IF_ERROR(Stopped());
    SPEXD_RETURN_IF_ERROR(ReadMask(options_.load_buffers, &mask));
    SPEXD_RETURN_IF_ERROR(ReadFibermap(&frame));
  }
  SPEXD_RETURN_IF_ERROR(Stopped());
  ApplyPixelRules(has_mask_ ? mask.data() : nullptr, options_.mask_policy, &frame, options_.pool);
  return frame;
}

absl::Status PreprocReader::ReadRawPlanes(const FitsFile::RawFloatImage& raw_image,
                                           const FitsFile::RawFloatImage& raw_ivar,
                                           PreprocImage* frame) {
  const std::size_t n = static_cast<std::size_t>(raw_image.pixels);
  frame->raw_bad_bits = MaskBadBits(options_.mask_policy);
  SPEXD_ASSIGN_OR_RETURN(FitsFile::RawBytes bytes, file_.OpenRawBytes());
  // A .fits.gz inflated into a block of the planes' pool (InflatePools): the planes are
  // the file's own bytes there, shared with the reader, not copied (they keep the block
  // until the backend has uploaded them).
  if (std::shared_ptr<const void> shared = file_.SharedBytes(); shared != nullptr) {
    const char* image = bytes.Direct(raw_image.data_offset, n * 4);
    const char* ivar = bytes.Direct(raw_ivar.data_offset, n * 4);
    if (image != nullptr && ivar != nullptr && IsAligned<uint32_t>(image) &&
        IsAligned<uint32_t>(ivar)) {
      frame->image_raw = PlaneBuffer<uint32_t>::Part(
          shared, reinterpret_cast<uint32_t*>(const_cast<char*>(image)), n);
      frame->ivar_raw = PlaneBuffer<uint32_t>::Part(
          shared, reinterpret_cast<uint32_t*>(const_cast<char*>(ivar)), n);
      SPEXD_RETURN_IF_ERROR(ReadMask(options_.buffers, &frame->mask_raw));
      SPEXD_RETURN_IF_ERROR(ReadFibermap(frame));
      return Stopped();
    }
  }
  // All three stay with the frame until the backend has uploaded them: the planes' own
  // (pinned) pool, not the load's.
  frame->image_raw = PlaneBuffer<uint32_t>::Make(n, options_.buffers);
  frame->ivar_raw = PlaneBuffer<uint32_t>::Make(n, options_.buffers);
  const int chunks = DecodeChunks(raw_image.pixels);
  absl::Mutex mu;
  absl::Status copy, side;
  // Task 0 reads MASK and FIBERMAP on the CFITSIO handle (this task's alone); the others
  // copy a chunk of each plane, straight from the file (pread) or the inflated bytes.
  auto task = [&](int /*worker*/, int t) {
    if (t == 0) {
      side = ReadMask(options_.buffers, &frame->mask_raw);
      if (side.ok()) side = ReadFibermap(frame);
      return;
    }
    const int64_t lo = int64_t{t - 1} * kDecodeChunkPixels;
    const int64_t hi = std::min(raw_image.pixels, lo + kDecodeChunkPixels);
    const std::size_t nbytes = static_cast<std::size_t>(hi - lo) * 4;
    absl::Status st;
    for (const auto& [raw, out] : {std::pair{&raw_image, frame->image_raw.data()},
                                   std::pair{&raw_ivar, frame->ivar_raw.data()}}) {
      const int64_t offset = raw->data_offset + lo * 4;
      char* dst = reinterpret_cast<char*>(out + lo);
      if (const char* src = bytes.Direct(offset, nbytes); src != nullptr) {
        std::memcpy(dst, src, nbytes);
      } else {
        st.Update(bytes.Read(offset, nbytes, dst));
      }
    }
    if (!st.ok()) {
      absl::MutexLock lock(&mu);
      copy.Update(st);
    }
  };
  ParallelFor(options_.pool, HardwareThreads(), 1 + chunks, task);
  SPEXD_RETURN_IF_ERROR(side);
  SPEXD_RETURN_IF_ERROR(copy);
  return Stopped();
}

absl::StatusOr<PreprocReader> PreprocReader::Open(const std::string& path,
                                                  const PreprocOptions& options,
                                                  const FitsSizeLimits& limits, StopFn stop) {
  return Guarded(path, [&]() -> absl::StatusOr<PreprocReader> {
    if (FileIsGzip(path)) {
      // Inflated here, within the limits, rather than by CFITSIO (which would inflate
      // the whole stream before any header could be checked).
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
      }
      absl::StatusOr<InflatedFits> fits =
          InflateFitsFd(fd, path, limits, stop, InflatePools(options), PreprocHduCheck());
      close(fd);
      if (!fits.ok()) return fits.status();
      return OpenInflated(*std::move(fits), path, options, limits, stop);
    }
    SPEXD_ASSIGN_OR_RETURN(FitsFile file, FitsFile::OpenRead(path));
    PreprocReader reader(std::move(file), options, limits, stop);
    SPEXD_RETURN_IF_ERROR(reader.CheckHeaders());
    return reader;
  });
}

absl::StatusOr<PreprocReader> PreprocReader::OpenMemory(std::string bytes, const std::string& name,
                                                        const PreprocOptions& options,
                                                        const FitsSizeLimits& limits,
                                                        StopFn stop) {
  return Guarded(name, [&]() -> absl::StatusOr<PreprocReader> {
    if (IsGzip(bytes)) {
      absl::StatusOr<InflatedFits> fits =
          InflateFits(bytes, name, limits, stop, InflatePools(options), PreprocHduCheck());
      bytes = std::string();  // the compressed upload, no longer needed
      if (!fits.ok()) return fits.status();
      return OpenInflated(*std::move(fits), name, options, limits, stop);
    }
    SPEXD_ASSIGN_OR_RETURN(FitsFile file, FitsFile::OpenMemory(std::move(bytes), name));
    PreprocReader reader(std::move(file), options, limits, stop);
    SPEXD_RETURN_IF_ERROR(reader.CheckHeaders());
    return reader;
  });
}

absl::StatusOr<PreprocReader> PreprocReader::OpenInflated(InflatedFits fits, const std::string& name,
                                                          const PreprocOptions& options,
                                                          const FitsSizeLimits& limits,
                                                          StopFn stop) {
  absl::StatusOr<FitsFile> file = fits.block.empty()
                                      ? FitsFile::OpenMemory(std::move(fits.bytes), name)
                                      : FitsFile::OpenMemory(std::move(fits.block), name);
  if (!file.ok()) return file.status();
  PreprocReader reader(*std::move(file), options, limits, std::move(stop));
  SPEXD_RETURN_IF_ERROR(reader.CheckHeaders());
  return reader;
}

absl::StatusOr<PreprocImage> PreprocReader::Read() {
  SPEXD_RETURN_IF_ERROR(Stopped());
  return Guarded(file_.name(), [&]() -> absl::StatusOr<PreprocImage> {
    SPEXD_ASSIGN_OR_RETURN(PreprocImage frame, ReadPlanes());
    if (!float32_values_ && !frame.has_float32_planes()) {
      SPEXD_RETURN_IF_ERROR(CheckFloat32Range(frame.image, frame.width, file_.name(), "IMAGE",
                                              options_.pool));
      SPEXD_RETURN_IF_ERROR(CheckFloat32Range(frame.ivar, frame.width, file_.name(), "IVAR",
                                              options_.pool));
    }
    return frame;
  });
}

absl::StatusOr<PreprocImage> ReadPreproc(const std::string& path, const PreprocOptions& options) {
  SPEXD_ASSIGN_OR_RETURN(PreprocReader reader, PreprocReader::Open(path, options));
  return reader.Read();
}

absl::StatusOr<PreprocImage> ReadPreprocFromMemory(const void* data, std::size_t size,
                                                   const std::string& name,
                                                   const PreprocOptions& options) {
  std::string bytes;
  try {
    bytes.assign(static_cast<const char*>(data), size);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": out of memory reading preproc"));
  }
  SPEXD_ASSIGN_OR_RETURN(PreprocReader reader, PreprocReader::OpenMemory(std::move(bytes), name, options));
  return reader.Read();
}

}  // namespace spexd::core
