#include "core/preproc.h"

#include <fitsio.h>

#include <cmath>
#include <cstdint>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/fits_file.h"
#include "core/status_macros.h"

namespace spexd::core {
namespace {

// A real DESI frame has 17 M pixels; 2^28 (2 GiB per float64 plane) rejects an absurd
// header before we try to allocate for it.
constexpr long kMaxPixels = 1L << 28;

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

// Validates the current HDU as a complete, non-empty 2-D image and returns its
// description.
absl::StatusOr<FitsFile::ImageInfo> CheckPlane(FitsFile& file) {
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo info, file.GetImageInfo());
  SPEXD_RETURN_IF_ERROR(file.CheckHduComplete());
  if (info.naxes.size() != 2) {
    bool empty = info.naxes.empty();
    for (long a : info.naxes) empty = empty || a == 0;
    if (empty) return file.Invalid(absl::StrCat("empty image ", ShapeText(info)));
    return file.Invalid(absl::StrCat("image must be 2-D, is ", ShapeText(info)));
  }
  if (info.naxes[0] <= 0 || info.naxes[1] <= 0) {
    return file.Invalid(absl::StrCat("empty image ", ShapeText(info)));
  }
  if (info.naxes[0] > kMaxPixels / info.naxes[1]) {
    return file.Invalid(absl::StrCat("image ", ShapeText(info), " is too large (limit ",
                                     kMaxPixels, " pixels)"));
  }
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

absl::StatusOr<PreprocImage> ReadFromFits(FitsFile& file, const PreprocOptions& options) {
  PreprocImage frame;
  frame.source_name = file.name();

  // Validate every header before reading pixel data, so that a bad file fails fast.
  SPEXD_ASSIGN_OR_RETURN(bool has_image, MoveIfPresent(file, "IMAGE"));
  if (!has_image) return MissingHdu(file, "IMAGE");
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo image_info, CheckPlane(file));
  SPEXD_RETURN_IF_ERROR(CheckFloatPlane(file, image_info));

  SPEXD_ASSIGN_OR_RETURN(bool has_ivar, MoveIfPresent(file, "IVAR"));
  if (!has_ivar) return MissingHdu(file, "IVAR");
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo ivar_info, CheckPlane(file));
  SPEXD_RETURN_IF_ERROR(CheckSameShape(file, "IVAR", ivar_info, image_info));
  SPEXD_RETURN_IF_ERROR(CheckFloatPlane(file, ivar_info));

  SPEXD_ASSIGN_OR_RETURN(bool has_mask, MoveIfPresent(file, "MASK"));
  if (has_mask) {
    SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo mask_info, CheckPlane(file));
    SPEXD_RETURN_IF_ERROR(CheckSameShape(file, "MASK", mask_info, image_info));
  }

  SPEXD_ASSIGN_OR_RETURN(bool has_fibermap, MoveIfPresent(file, "FIBERMAP"));
  if (!has_fibermap && options.require_fibermap) return MissingHdu(file, "FIBERMAP");

  // Pixel data. CFITSIO converts float32 to float64 while reading (exact, spec §2.1),
  // decompresses tiles, and applies BSCALE/BZERO, so each plane is read once, straight
  // into the vector that the frame keeps.
  frame.width = static_cast<int>(image_info.naxes[0]);
  frame.height = static_cast<int>(image_info.naxes[1]);
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IMAGE"));
  SPEXD_ASSIGN_OR_RETURN(frame.image_header, file.ReadUserCards());
  SPEXD_ASSIGN_OR_RETURN(frame.image, file.ReadImage<double>());
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("IVAR"));
  SPEXD_ASSIGN_OR_RETURN(frame.ivar, file.ReadImage<double>());
  std::vector<uint16_t> mask;
  if (has_mask) {
    SPEXD_RETURN_IF_ERROR(file.MoveToHdu("MASK"));
    SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo mask_info, file.GetImageInfo());
    SPEXD_ASSIGN_OR_RETURN(mask, ReadMaskBits(file, mask_info));
  }
  if (has_fibermap) {
    SPEXD_RETURN_IF_ERROR(file.MoveToHdu("FIBERMAP"));
    SPEXD_ASSIGN_OR_RETURN(frame.fibermap_fits, CopyFibermap(file));
  }

  ApplyPixelRules(has_mask ? mask.data() : nullptr, options.mask_policy, &frame);
  return frame;
}

// Large allocations are the one place the reader can throw (std::bad_alloc); convert
// at the module edge (style.md "Errors").
template <typename OpenFn>
absl::StatusOr<PreprocImage> ReadGuarded(const std::string& name, OpenFn open,
                                         const PreprocOptions& options) {
  try {
    absl::StatusOr<FitsFile> file = open();
    if (!file.ok()) return file.status();
    return ReadFromFits(*file, options);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": out of memory reading preproc"));
  }
}

}  // namespace

absl::StatusOr<PreprocImage> ReadPreproc(const std::string& path, const PreprocOptions& options) {
  return ReadGuarded(path, [&] { return FitsFile::OpenRead(path); }, options);
}

absl::StatusOr<PreprocImage> ReadPreprocFromMemory(const void* data, std::size_t size,
                                                   const std::string& name,
                                                   const PreprocOptions& options) {
  return ReadGuarded(name, [&] { return FitsFile::OpenMemory(data, size, name); }, options);
}

void ApplyPixelRules(const uint16_t* mask, MaskPolicy policy, PreprocImage* frame) {
  // kDesispec: desi_extract_spectra's extractmaskval (bits 0-7 and 9; bit 8
  // BADREADNOISE is kept). kAnyBit: gpu_specter's spex. Spec §2.1 and "Decisions".
  const uint16_t bad_bits = policy == MaskPolicy::kDesispec
                                ? static_cast<uint16_t>(kDesispecExtractMask)
                                : static_cast<uint16_t>(0xFFFF);
  std::vector<double>& image = frame->image;
  std::vector<double>& ivar = frame->ivar;
  const std::size_t n = image.size() < ivar.size() ? image.size() : ivar.size();
  std::size_t n_masked = 0, n_nonfinite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // Non-finite rule (spec "Decisions", fix over the reference): a NaN or Inf in either
    // plane would propagate through the dense GEMV and the chi2 stage, so the pixel
    // becomes unmeasured. Identical results for finite input.
    if (!std::isfinite(image[i]) || !std::isfinite(ivar[i])) {
      image[i] = 0.0;
      ivar[i] = 0.0;
      ++n_nonfinite;
    }
    if (mask != nullptr && (mask[i] & bad_bits) != 0) {
      // The image is deliberately not zeroed here (spec §2.1: the reference keeps it).
      ivar[i] = 0.0;
      ++n_masked;
    } else if (ivar[i] < 0.0) {
      // Negative ivar is not handled by the reference (spec §2.1). It is not a valid
      // weight: it would make the patch's AᵀNA indefinite and fail the whole patch's
      // solve. Treating the pixel as unmeasured confines the damage to one pixel, and
      // counting it as masked keeps it visible in logs and metrics.
      ivar[i] = 0.0;
      ++n_masked;
    }
  }
  frame->n_masked = n_masked;
  frame->n_nonfinite = n_nonfinite;
}

}  // namespace spexd::core
