// A check of a FITS file's structure made before CFITSIO sees it. CFITSIO trusts the
// structural keywords of every header it parses: a mutated PSF whose NAXIS1 value was
// not a number made it calloc about 15 PB while moving to the table's HDU (found by
// fuzzing, tests/fuzz/regressions/psf/). This walks the headers itself and refuses a file
// unless every HDU's structural keywords are well-formed integers in the FITS standard's
// ranges and every HDU's data fits in the bytes actually given, so that nothing CFITSIO
// later allocates from a header can exceed the size of the input. Tile-compressed image
// HDUs get the further check of compressed_hdu_check.h (codec, parameters, every tile's
// stream).
#ifndef SPEXD_CORE_FITS_LAYOUT_H_
#define SPEXD_CORE_FITS_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace spexd::core {

// Reads `n` bytes at `offset` into `out`; false on a read error.
using FitsByteReader = absl::FunctionRef<bool(std::int64_t offset, std::size_t n, char* out)>;

// INVALID_ARGUMENT naming `name` and the HDU when the headers of the `size`-byte file that
// `read` gives are malformed or announce more data than the file holds (FITS standard
// 4.0 §4.4.1). Bytes after the last HDU that do not start an extension are ignored, as
// CFITSIO does.
absl::Status CheckFitsLayout(FitsByteReader read, std::int64_t size, absl::string_view name);
// Where one HDU lies: its header from `header_start` to `data_start` (whole records, END
// card included), then `data_bytes` of data (without the padding to a record).
struct FitsHduSpan {
  std::int64_t header_start = 0, data_start = 0, data_bytes = 0;
};
// The same check, also giving every HDU's span, in order, when it passes.
absl::Status CheckFitsLayout(FitsByteReader read, std::int64_t size, absl::string_view name,
                             std::vector<FitsHduSpan>* spans);
// The same for a file held in memory.
absl::Status CheckFitsLayout(const void* data, std::size_t size, absl::string_view name);

}  // namespace spexd::core

#endif  // SPEXD_CORE_FITS_LAYOUT_H_
