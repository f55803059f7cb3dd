#include "core/io/internal/rice_image_tiles.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/parallel_for.h"

// CFITSIO's RICE decoder for 1- and 2-byte values: exported by libcfitsio, declared only in
// its internal header fitsio2.h. Reentrant (a constant lookup table, no global state).
extern "C" int fits_rdecomp_short(unsigned char* c, int clen, unsigned short array[], int nx,
                                  int nblock);

namespace spexd::core::internal {
namespace {

// Past the end of its stream, CFITSIO's decoder checks for the end only after each block
// of pixels, so it may read up to about a block's worth (32 values of at most 2 bytes, a
// split code, a unary run ended by a non-zero byte) beyond it. Each tile is copied ahead of
// this many 0xFF bytes: any such read stays inside the copy and ends the run at once, and
// the block-end check then reports the tile as corrupt.
constexpr std::size_t kStreamSlack = 256;

// Tiles decoded by one task: enough tasks for every pool thread, few enough that each
// task's set-up (its buffers) is amortised over several tiles.
constexpr std::int64_t kTilesPerTask = 16;

// `n` values with `flip` applied, from a tile's own buffer into the image: the two never
// overlap, which lets the loop run as vectors (with a possible overlap it ran one value at
// a time, a third of the mask's decode).
void CopyFlipped(const std::uint16_t* __restrict from, std::int64_t n, std::uint16_t flip,
                 std::uint16_t* __restrict to) {
  for (std::int64_t i = 0; i < n; ++i) to[i] = static_cast<std::uint16_t>(from[i] ^ flip);
}

}  // namespace

absl::StatusOr<bool> DecodeRiceTiles16(FitsFile& file, std::int64_t pixels, std::uint16_t* out,
                                       TaskPool* pool) {
  fitsfile* f = file.get();
  const FITSfile& h = *f->Fptr;
  if (h.compressimg != 1 || h.compress_type != RICE_1 || h.zbitpix != SHORT_IMG ||
      h.zndim != 2 || h.rice_bytepix != 2 ||
      (h.rice_blocksize != 16 && h.rice_blocksize != 32) || h.cn_compressed <= 0 ||
      h.cn_uncompressed != 0 || h.cn_gzip_data != 0 || h.cn_zscale != 0 || h.cn_zzero != 0 ||
      h.cn_zblank != 0) {
    return false;
  }
  const std::int64_t width = h.znaxis[0], height = h.znaxis[1];
  const std::int64_t tx = h.tilesize[0], ty = h.tilesize[1];
  if (width <= 0 || height <= 0 || tx <= 0 || ty <= 0 || width * height != pixels) return false;
  // int16 keeps its bits; BZERO 32768 makes uint16 (stored + 32768, the sign bit flipped).
  if (file.ReadOptionalDouble("BSCALE").value_or(1.0) != 1.0) return false;
  const double bzero = file.ReadOptionalDouble("BZERO").value_or(0.0);
  if (bzero != 0.0 && bzero != 32768.0) return false;
  const std::uint16_t flip = bzero == 0.0 ? 0 : 0x8000;
  absl::StatusOr<FitsFile::RawBytes> bytes = file.OpenRawBytes();
  if (!bytes.ok()) return false;

  const std::int64_t ntx = (width + tx - 1) / tx, nty = (height + ty - 1) / ty;
  const std::int64_t tiles = ntx * nty;
  std::vector<LONGLONG> length(static_cast<std::size_t>(tiles)), heap(length.size());
  LONGLONG head = 0, data = 0, end = 0;
  int status = 0;
  fits_get_hduaddrll(f, &head, &data, &end, &status);
  fits_read_descriptsll(f, h.cn_compressed, 1, tiles, length.data(), heap.data(), &status);
  if (status != 0) return file.Error(status, "reading the tile table of a compressed image");
  // A tile stored some other way (a zero-length stream) is left to CFITSIO.
  for (LONGLONG n : length) {
    if (n < 3 || n > (std::int64_t{1} << 30)) return false;
  }
  const std::int64_t heap_start = data + h.heapstart;

  absl::Mutex mu;
  absl::Status failed;
  const int ntasks = static_cast<int>((tiles + kTilesPerTask - 1) / kTilesPerTask);
  ParallelFor(pool, HardwareThreads(), ntasks, [&](int /*worker*/, int task) {
    std::string stream;
    std::vector<unsigned short> values;
    const std::int64_t first = task * kTilesPerTask;
    const std::int64_t last = std::min(tiles, first + kTilesPerTask);
    for (std::int64_t t = first; t < last; ++t) {
      const std::size_t n = static_cast<std::size_t>(length[static_cast<std::size_t>(t)]);
      stream.resize(n + kStreamSlack);
      std::fill(stream.begin() + static_cast<std::ptrdiff_t>(n), stream.end(), '\xff');
      absl::Status st = bytes->Read(heap_start + heap[static_cast<std::size_t>(t)], n, stream.data());
      const std::int64_t x0 = t % ntx * tx, y0 = t / ntx * ty;
      const std::int64_t w = std::min(tx, width - x0), rows = std::min(ty, height - y0);
      // A tile of whole rows (desispec's MASK: one row a tile) lies in the image as it is
      // stored: decoded in place, with no copy.
      const bool whole_rows = w == width;
      if (!whole_rows) values.resize(static_cast<std::size_t>(w * rows));
      unsigned short* decoded = whole_rows ? out + y0 * width : values.data();
      // The message is made after the loop: naming the HDU reads it through CFITSIO,
      // whose handle is this thread's caller's.
      if (st.ok() && fits_rdecomp_short(reinterpret_cast<unsigned char*>(stream.data()),
                                        static_cast<int>(n), decoded, static_cast<int>(w * rows),
                                        h.rice_blocksize) != 0) {
        st = absl::InvalidArgumentError(
            absl::StrCat("tile ", t + 1, " of the compressed image does not decode"));
      }
      if (!st.ok()) {
        absl::MutexLock lock(&mu);
        if (failed.ok()) failed = std::move(st);
        return;
      }
      if (whole_rows) {
        if (flip != 0) {
          for (std::int64_t i = 0; i < w * rows; ++i) decoded[i] ^= flip;
        }
        continue;
      }
      for (std::int64_t y = 0; y < rows; ++y) {
        CopyFlipped(decoded + y * w, w, flip, out + (y0 + y) * width + x0);
      }
    }
  });
  if (!failed.ok()) return file.Invalid(failed.message());
  return true;
}

}  // namespace spexd::core::internal
