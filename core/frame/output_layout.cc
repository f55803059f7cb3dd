#include "core/frame/output_layout.h"

namespace spexd::core {
namespace {

uint64_t AlignUp(uint64_t x) { return (x + kOutputAlignment - 1) / kOutputAlignment * kOutputAlignment; }

}  // namespace

OutputLayout MakeOutputLayout(int nspec, int nwave, int ndiag) {
  OutputLayout l;
  l.nspec = nspec;
  l.nwave = nwave;
  l.ndiag = ndiag;
  const uint64_t bins = l.bins();
  uint64_t at = 0;
  auto section = [&at](uint64_t bytes) {
    const uint64_t start = at;
    at = AlignUp(start + bytes);
    return start;
  };
  l.flux = section(bins * sizeof(double));
  l.ivar = section(bins * sizeof(double));
  l.mask = section(bins * sizeof(uint32_t));
  l.resolution = section(bins * l.ndiags() * sizeof(double));
  l.chi2pix = section(bins * sizeof(double));
  l.total_bytes = at;
  return l;
}

}  // namespace spexd::core
