// Layout of extraction results written into a client's device region (the
// contract documented in proto/spexd/v1/spexd.proto, CudaOutput). Rows are the plan's
// fibres (row r = fibre specmin + r); every section is little-endian, row-major, and
// starts at a multiple of kOutputAlignment from the region offset the client named.
#ifndef SPEXD_CORE_OUTPUT_LAYOUT_H_
#define SPEXD_CORE_OUTPUT_LAYOUT_H_

#include <cstdint>

namespace spexd::core {

inline constexpr uint64_t kOutputAlignment = 256;

struct OutputLayout {
  int nspec = 0, nwave = 0, ndiag = 0;
  // Byte offsets of each section from the start of the output, and the total size.
  uint64_t flux = 0;        // float64 [nspec][nwave], photons/Angstrom
  uint64_t ivar = 0;        // float64 [nspec][nwave]
  uint64_t mask = 0;        // uint32  [nspec][nwave], desispec specmask bits
  uint64_t resolution = 0;  // float64 [nspec][2*ndiag+1][nwave]
  uint64_t chi2pix = 0;     // float64 [nspec][nwave]
  uint64_t total_bytes = 0;

  uint64_t bins() const { return static_cast<uint64_t>(nspec) * static_cast<uint64_t>(nwave); }
  uint64_t ndiags() const { return 2 * static_cast<uint64_t>(ndiag) + 1; }
};

OutputLayout MakeOutputLayout(int nspec, int nwave, int ndiag);

}  // namespace spexd::core

#endif  // SPEXD_CORE_OUTPUT_LAYOUT_H_
