#include "core/preproc.h"

#include <fitsio.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/fits_file.h"
#include "core/fits_gunzip.h"
#include "core/gzip.h"
#include "core/pixel_rules.h"
#include "core/status_macros.h"

namespace spexd::core {
namespace {

// Bytes a decoded pixel takes: IMAGE and IVAR as float64, MASK as 16 bits.
constexpr int64_t kDecodedBytesPerPixel = 8 + 8 + 2;

std::string ShapeText(const FitsFile::ImageInfo& info) {
  std::string out;
  // FITS lists NAXIS1 (x, fastest) first; print row-major [NAXISn]...[NAXIS1] as the
  // spec writes shapes ([H][W]).
  for (auto it = info.naxes.rbegin(); it != info.naxes.rend(); ++it) {
    absl::StrAppend(&out, "[", *it, "]");
  }
  return out.empty() ? "[] (NAXIS = 0)" : out;
}

// Moves to `extname`. false when the file has no such HDU; any other failure (e.g. a
// header cut off by truncation) is returned as an error.
absl::StatusOr<bool> MoveIfPresent(FitsFile& file, absl::string_view extname) {
  absl::Status status = file.MoveToHdu(extname);
  if (status.ok()) return true;
  if (absl::IsNotFound(status)) return false;
  return status;
}

absl::Status MissingHdu(const FitsFile& file, const std::string& extname) {
  return absl::InvalidArgumentError(
      absl::StrCat(file.name(), ": missing ", extname, " HDU (no HDU with EXTNAME '", extname,
                   "'; a DESI preproc file has IMAGE, IVAR, MASK, FIBERMAP)"));
}

// Validates the current HDU as a complete, non-empty 2-D image of at most `max_pixels`
// pixels (RESOURCE_EXHAUSTED past it: judged from the header, tile-compressed or not,
// before anything is decoded) and returns its description.
absl::StatusOr<FitsFile::ImageInfo> CheckPlane(FitsFile& file, int64_t max_pixels) {
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo info, file.GetImageInfo());
  if (info.naxes.size() != 2) {
    bool empty = info.naxes.empty();
    for (long a : info.naxes) empty = empty || a == 0;
    if (empty) return file.Invalid(absl::StrCat("empty image ", ShapeText(info)));
    return file.Invalid(absl::StrCat("image must be 2-D, is ", ShapeText(info)));
  }
  if (info.naxes[0] <= 0 || info.naxes[1] <= 0) {
    return file.Invalid(absl::StrCat("empty image ", ShapeText(info)));
  }
  if (info.naxes[0] > max_pixels / info.naxes[1]) {
    const double pixels = static_cast<double>(info.naxes[0]) * static_cast<double>(info.naxes[1]);
    return absl::ResourceExhaustedError(absl::StrCat(
        file.Invalid(absl::StrFormat("image %s has %.0f pixels, over the limit of %d",
                                     ShapeText(info), pixels, max_pixels))
            .message(),
        absl::StrFormat(" (decoding it would take %.0f MiB); refused before decoding",
                        pixels * kDecodedBytesPerPixel / (1 << 20))));
  }
  SPEXD_RETURN_IF_ERROR(file.CheckHduComplete());
  return info;
}

// IMAGE and IVAR are floating point in preproc files (spec §5.1). An integer plane
// means a wrong HDU or a raw (not preprocessed) image, so it is refused rather than
// converted.
absl::Status CheckFloatPlane(const FitsFile& file, const FitsFile::ImageInfo& info) {
  if (info.equiv_bitpix == FLOAT_IMG || info.equiv_bitpix == DOUBLE_IMG) {
    return absl::OkStatus();
  }
  return file.Invalid(absl::StrCat("wrong pixel type: BITPIX ", info.equiv_bitpix,
                                   " (expected float32 -32 or float64 -64)"));
}

absl::Status CheckSameShape(const FitsFile& file, const std::string& what,
                            const FitsFile::ImageInfo& info,
                            const FitsFile::ImageInfo& image_info) {
  if (info.naxes == image_info.naxes) return absl::OkStatus();
  return file.Invalid(absl::StrCat(what, " shape ", ShapeText(info),
                                   " does not match IMAGE shape ", ShapeText(image_info)));
}

// MASK holds ccdmask bits in 16 bits (spec §5.1: int16 on disk, read as uint16).
// uint16 (int16 + BZERO 32768) and uint8 convert directly; plain int16 keeps its bit
// pattern (two's complement, so -32768 is bit 15); int32 must hold values that fit in
// 16 bits, because silently dropping high bits would unmask pixels under kAnyBit.
absl::StatusOr<std::vector<uint16_t>> ReadMaskBits(FitsFile& file,
                                                   const FitsFile::ImageInfo& info) {
  switch (info.equiv_bitpix) {
    case BYTE_IMG:
    case USHORT_IMG:
      return file.ReadImage<uint16_t>();
    case SHORT_IMG: {
      SPEXD_ASSIGN_OR_RETURN(std::vector<int16_t> raw, file.ReadImage<int16_t>());
      std::vector<uint16_t> bits(raw.size());
      for (std::size_t i = 0; i < raw.size(); ++i) bits[i] = static_cast<uint16_t>(raw[i]);
      return bits;
    }
    case LONG_IMG: {
      SPEXD_ASSIGN_OR_RETURN(std::vector<int32_t> raw, file.ReadImage<int32_t>());
      std::vector<uint16_t> bits(raw.size());
      for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] < 0 || raw[i] > 0xFFFF) {
          return file.Invalid(absl::StrCat("MASK value ", raw[i], " at pixel ", i,
                                           " does not fit in 16 mask bits"));
        }
        bits[i] = static_cast<uint16_t>(raw[i]);
      }
      return bits;
    }
    default:
      return file.Invalid(absl::StrCat("wrong pixel type for MASK: BITPIX ", info.equiv_bitpix,
                                       " (expected an integer type: uint8, int16, uint16 "
                                       "or int32)"));
  }
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

// Large allocations are the one place the reader can throw (std::bad_alloc); convert
// at the module edge (style.md "Errors").
template <typename Fn>
auto Guarded(const std::string& name, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": out of memory reading preproc"));
  }
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

absl::StatusOr<PreprocImage> PreprocReader::ReadPlanes() {
  FitsFile& file = file_;
  PreprocImage frame;
  frame.source_name = file.name();
  // Pixel data. CFITSIO converts float32 to float64 while reading (exact, spec §2.1),
  // decompresses tiles, and applies BSCALE/BZERO, so each plane is read once, straight
  // into the vector that the frame keeps.
  frame.width = width();
  frame.height = height();
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IMAGE"));
  SPEXD_ASSIGN_OR_RETURN(frame.image_header, file.ReadUserCards());
  SPEXD_ASSIGN_OR_RETURN(frame.image, file.ReadImage<double>());
  SPEXD_RETURN_IF_ERROR(Stopped());
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IVAR"));
  SPEXD_ASSIGN_OR_RETURN(frame.ivar, file.ReadImage<double>());
  SPEXD_RETURN_IF_ERROR(Stopped());
  std::vector<uint16_t> mask;
  if (has_mask_) {
    SPEXD_RETURN_IF_ERROR(file.MoveToHdu("MASK"));
    SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo mask_info, file.GetImageInfo());
    SPEXD_ASSIGN_OR_RETURN(mask, ReadMaskBits(file, mask_info));
  }
  if (has_fibermap_) {
    SPEXD_RETURN_IF_ERROR(file.MoveToHdu("FIBERMAP"));
    SPEXD_ASSIGN_OR_RETURN(frame.fibermap_fits, CopyFibermap(file));
  }
  ApplyPixelRules(has_mask_ ? mask.data() : nullptr, options_.mask_policy, &frame);
  return frame;
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
      absl::StatusOr<std::string> fits = GunzipFitsFd(fd, path, limits, stop);
      close(fd);
      if (!fits.ok()) return fits.status();
      return OpenMemory(*std::move(fits), path, options, limits, stop);
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
      SPEXD_ASSIGN_OR_RETURN(bytes, GunzipFits(bytes, name, limits, stop));
    }
    SPEXD_ASSIGN_OR_RETURN(FitsFile file, FitsFile::OpenMemory(std::move(bytes), name));
    PreprocReader reader(std::move(file), options, limits, stop);
    SPEXD_RETURN_IF_ERROR(reader.CheckHeaders());
    return reader;
  });
}

absl::StatusOr<PreprocImage> PreprocReader::Read() {
  SPEXD_RETURN_IF_ERROR(Stopped());
  return Guarded(file_.name(), [&] { return ReadPlanes(); });
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

void ApplyPixelRules(const uint16_t* mask, MaskPolicy policy, PreprocImage* frame) {
  const uint16_t bad_bits = MaskBadBits(policy);
  std::vector<double>& image = frame->image;
  std::vector<double>& ivar = frame->ivar;
  const std::size_t n = image.size() < ivar.size() ? image.size() : ivar.size();
  std::size_t n_masked = 0, n_nonfinite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned what =
        ApplyPixelRule(bad_bits, mask != nullptr ? mask[i] : uint16_t{0}, &image[i], &ivar[i]);
    n_nonfinite += (what & kPixelNonfinite) != 0 ? 1 : 0;
    n_masked += (what & kPixelMasked) != 0 ? 1 : 0;
  }
  frame->n_masked = n_masked;
  frame->n_nonfinite = n_nonfinite;
}

}  // namespace spexd::core
