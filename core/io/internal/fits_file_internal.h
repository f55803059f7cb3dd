// What the FitsFile sources share (fits_file.cc: the handle; fits_file_read.cc: keywords,
// pixels and cards read; fits_file_write.cc: the same written). Not for other callers.
#ifndef SPEXD_CORE_FITS_FILE_INTERNAL_H_
#define SPEXD_CORE_FITS_FILE_INTERNAL_H_

#include <fitsio.h>

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace spexd::core::internal {

// CFITSIO's text for `status`, with the first message of its stack; drains the stack.
std::string CfitsioText(int status);

// True for the cards CFITSIO writes itself (structure, columns, tile compression,
// checksums, EXTNAME, scaling): ReadUserCards leaves them out, WriteCards skips them.
bool IsStructuralKey(absl::string_view key);

// The CFITSIO data type and image type of each pixel type FitsFile reads and writes.
template <typename T>
struct FitsType;
template <> struct FitsType<double> { static constexpr int kData = TDOUBLE; static constexpr int kImg = DOUBLE_IMG; };
template <> struct FitsType<float> { static constexpr int kData = TFLOAT; static constexpr int kImg = FLOAT_IMG; };
template <> struct FitsType<int32_t> { static constexpr int kData = TINT; static constexpr int kImg = LONG_IMG; };
template <> struct FitsType<uint32_t> { static constexpr int kData = TUINT; static constexpr int kImg = ULONG_IMG; };
template <> struct FitsType<int16_t> { static constexpr int kData = TSHORT; static constexpr int kImg = SHORT_IMG; };
template <> struct FitsType<uint16_t> { static constexpr int kData = TUSHORT; static constexpr int kImg = USHORT_IMG; };
template <> struct FitsType<uint8_t> { static constexpr int kData = TBYTE; static constexpr int kImg = BYTE_IMG; };
template <> struct FitsType<int64_t> { static constexpr int kData = TLONGLONG; static constexpr int kImg = LONGLONG_IMG; };

// Applies X to every pixel type above: the read and write templates are instantiated for
// the same list.
#define SPEXD_FITS_PIXEL_TYPES(X) \
  X(double) X(float) X(int32_t) X(uint32_t) X(int16_t) X(uint16_t) X(uint8_t) X(int64_t)

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_FITS_FILE_INTERNAL_H_
