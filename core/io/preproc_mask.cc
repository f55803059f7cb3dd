// Reading a preproc's MASK HDU into 16 mask bits a pixel (PreprocReader::ReadMask).
#include <fitsio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/fits_file.h"
#include "core/io/internal/rice_image_tiles.h"
#include "core/io/preproc.h"

namespace spexd::core {
namespace {

// MASK holds ccdmask bits in 16 bits (spec §5.1: int16 on disk, read as uint16).
// uint16 (int16 + BZERO 32768) and uint8 convert directly; plain int16 keeps its bit
// pattern (two's complement, so -32768 is bit 15); int32 must hold values that fit in
// 16 bits, because silently dropping high bits would unmask pixels under kAnyBit.
// The bits go to a block from `buffers` (null: one of its own), uninitialised until read:
// the mask lives only while the frame is decoded, so its memory is reused frame to frame.
// A RICE_1 mask (desispec's) is decoded tile by tile on `pool` (rice_image_tiles.h).
absl::StatusOr<PlaneBuffer<uint16_t>> ReadMaskBits(FitsFile& file, const FitsFile::ImageInfo& info,
                                                   PlaneBufferPool* buffers, TaskPool* pool) {
  std::size_t n = 1;
  for (long a : info.naxes) n *= static_cast<std::size_t>(a);
  // Read as int16 (or uint16) straight into the uint16 array (same size; a signed and an
  // unsigned type may alias): the bit pattern is kept.
  auto read16 = [&](int type) -> absl::StatusOr<PlaneBuffer<uint16_t>> {
    PlaneBuffer<uint16_t> bits = PlaneBuffer<uint16_t>::Make(n, buffers);
    SPEXD_ASSIGN_OR_RETURN(const bool decoded,
                           internal::DecodeRiceTiles16(file, static_cast<std::int64_t>(n),
                                                       bits.data(), pool));
    if (decoded) return bits;
    int status = 0, anynul = 0;
    std::vector<long> fpixel(info.naxes.size(), 1);
    fits_read_pix(file.get(), type, fpixel.data(), static_cast<LONGLONG>(n), nullptr,
                  bits.data(), &anynul, &status);
    if (status != 0) return file.Error(status, "reading MASK data (truncated or corrupt file?)");
    return bits;
  };
  switch (info.equiv_bitpix) {
    case BYTE_IMG:
    case USHORT_IMG:
      return read16(TUSHORT);
    case SHORT_IMG:
      return read16(TSHORT);
    case LONG_IMG: {
      SPEXD_ASSIGN_OR_RETURN(std::vector<int32_t> raw, file.ReadImage<int32_t>());
      PlaneBuffer<uint16_t> bits = PlaneBuffer<uint16_t>::Make(raw.size(), buffers);
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

}  // namespace

absl::Status PreprocReader::ReadMask(PlaneBufferPool* buffers, PlaneBuffer<uint16_t>* mask) {
  if (!has_mask_) return absl::OkStatus();
  FitsFile& file = file_;
  SPEXD_RETURN_IF_ERROR(file.MoveToHdu("MASK"));
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo mask_info, file.GetImageInfo());
  SPEXD_ASSIGN_OR_RETURN(*mask, ReadMaskBits(file, mask_info, buffers, options_.pool));
  return absl::OkStatus();
}

}  // namespace spexd::core
