#include "core/io/internal/rice_stream_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace spexd::core::internal {
namespace {

// The bit reader of CFITSIO's decoder, with a bound on every byte it takes. `b` and
// `nbits` follow CFITSIO's variables exactly (32-bit unsigned arithmetic), since the
// decoder's branches depend on them.
class RiceWalk {
 public:
  explicit RiceWalk(absl::string_view s) : s_(s) {}

  bool Next(std::uint32_t* byte) {
    if (pos_ >= s_.size()) return false;
    *byte = static_cast<unsigned char>(s_[pos_++]);
    return true;
  }
  std::size_t pos() const { return pos_; }

 private:
  absl::string_view s_;
  std::size_t pos_ = 0;
};

// A run of zero bits this long never comes from an encoder (CFITSIO's picks each block's
// split so that a value's unary part is at most about 2 * blocksize bits); refusing it
// also keeps CFITSIO's int bit counter far from overflowing.
constexpr std::int64_t kMaxZeroRunBits = 1 << 16;

}  // namespace

absl::Status CheckRiceStream(absl::string_view stream, std::int64_t pixels, int blocksize,
                             int bytepix) {
  // CFITSIO's per-decoder constants: bits of the split code, its largest value (which
  // marks a block stored verbatim), and bits of a verbatim value.
  const int first_bytes = bytepix == 1 ? 1 : bytepix == 2 ? 2 : 4;
  const int fsbits = bytepix == 1 ? 3 : bytepix == 2 ? 4 : 5;
  const int fsmax = bytepix == 1 ? 6 : bytepix == 2 ? 14 : 25;
  const int bbits = 1 << fsbits;
  auto fail = [&](std::size_t at, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "is not a RICE_1 stream of ", pixels, " pixels: its ", stream.size(), " bytes ", what,
        " (at byte ", at, "; corrupt, truncated, or not RICE data)"));
  };
  if (stream.size() < static_cast<std::size_t>(first_bytes) + 1) {
    return fail(0, "are too few for its first value");
  }
  RiceWalk w(stream.substr(first_bytes));  // the first value is stored as is
  std::uint32_t b = 0;
  std::uint32_t byte = 0;
  if (!w.Next(&b)) return fail(first_bytes, "end early");
  std::int64_t nbits = 8;
  for (std::int64_t i = 0; i < pixels;) {
    nbits -= fsbits;
    while (nbits < 0) {
      if (!w.Next(&byte)) return fail(first_bytes + w.pos(), "end inside a block header");
      b = (b << 8) | byte;
      nbits += 8;
    }
    const int fs = static_cast<int>(b >> nbits) - 1;
    b &= (1u << nbits) - 1;
    const std::int64_t imax = std::min<std::int64_t>(i + blocksize, pixels);
    if (fs < 0) {
      i = imax;  // a block of equal values: no bits
    } else if (fs == fsmax) {
      for (; i < imax; ++i) {  // values stored verbatim, bbits each
        int k = bbits - static_cast<int>(nbits);
        for (k -= 8; k >= 0; k -= 8) {
          if (!w.Next(&b)) return fail(first_bytes + w.pos(), "end inside a verbatim value");
        }
        if (nbits > 0) {
          if (!w.Next(&b)) return fail(first_bytes + w.pos(), "end inside a verbatim value");
          b &= (1u << nbits) - 1;
        } else {
          b = 0;
        }
      }
    } else if (fs > fsmax) {
      return fail(first_bytes + w.pos(), absl::StrCat("hold a split code ", fs, " above ", fsmax));
    } else {
      for (; i < imax; ++i) {  // Rice codes: a unary part, then fs bits
        std::int64_t run = 0;
        while (b == 0) {
          nbits += 8;
          run += 8;
          if (run > kMaxZeroRunBits) return fail(first_bytes + w.pos(), "hold too long a run of zero bits");
          if (!w.Next(&b)) return fail(first_bytes + w.pos(), "end inside a value");
        }
        int top = 31;  // the highest set bit of b (b < 256 here)
        while ((b >> top) == 0) --top;
        nbits = top;  // CFITSIO: nbits -= nzero + 1, nzero = nbits - (top + 1)
        b ^= 1u << nbits;
        nbits -= fs;
        while (nbits < 0) {
          if (!w.Next(&byte)) return fail(first_bytes + w.pos(), "end inside a value");
          b = (b << 8) | byte;
          nbits += 8;
        }
        b &= (1u << nbits) - 1;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace spexd::core::internal
