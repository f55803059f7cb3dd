// libFuzzer target: .fits.gz reading and writing (core/io/internal/gzip.h,
// core/io/fits_gunzip.h). Per input:
//  - the input, compressed by GzipCompress in chunks of a few hundred bytes (size from its
//    first byte) on 1 or 3 threads, inflates to the input either way, with zlib and with
//    GzipDecoder in odd step sizes;
//  - the input itself, taken as a gzip stream (mostly corrupt): where both GzipDecoder and
//    zlib's GzipInflater accept it, the same bytes;
//  - InflateFits on the input within a 1 MiB byte limit: only OK, INVALID_ARGUMENT or
//    RESOURCE_EXHAUSTED, and its peak heap (sampled between its steps and after) stays
//    within a bound in proportion to the input and that limit (ASan builds). libFuzzer's
//    -timeout catches a decode whose time is not bounded.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#if __has_include(<sanitizer/allocator_interface.h>)
#include <sanitizer/allocator_interface.h>
#define SPEXD_HEAP_BYTES() __sanitizer_get_current_allocated_bytes()
#else
#define SPEXD_HEAP_BYTES() std::size_t{0}
#endif

#include "core/base/parallel_for.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "gzip_fuzzer: %s\n", what);
  std::abort();
}

// zlib's inflation of a gzip stream, or false.
bool ZlibGunzip(const std::string& gz, std::string* out) {
  spexd::core::GzipInflater inflater("fuzz.gz", [&](absl::string_view piece) {
    out->append(piece.data(), piece.size());
    // A bomb: not compared.
    return out->size() > (std::size_t{64} << 20) ? absl::ResourceExhaustedError("big") : absl::OkStatus();
  });
  return inflater.Feed(gz).ok() && inflater.Finish().ok();
}

// GzipDecoder's, `in_piece` input bytes and `out_step` output bytes at a time, or false.
bool DecoderGunzip(const std::string& gz, std::size_t in_piece, std::size_t out_step, std::string* out) {
  spexd::core::GzipDecoder d("fuzz.gz");
  std::string buf(out_step, '\0');
  for (std::size_t at = 0; at < gz.size(); at += in_piece) {
    absl::string_view piece = absl::string_view(gz).substr(at, in_piece);
    while (!piece.empty()) {
      const std::size_t before = piece.size();
      auto n = d.Decode(&piece, buf.data(), buf.size());
      if (!n.ok()) return false;
      out->append(buf.data(), *n);
      if (*n == 0 && piece.size() == before) Fail("a decode step made no progress");
      if (out->size() > (std::size_t{64} << 20)) return false;  // a bomb: not compared
    }
  }
  return d.Finish().ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  static spexd::core::TaskPool* pool = spexd::core::MakeTaskPool(2).release();
  const std::string want(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t chunk = 64 + (data[0] & 0x7F) * 8;
  auto one = spexd::core::GzipCompress(want, nullptr, 1, chunk);
  auto three = spexd::core::GzipCompress(want, pool, 3, chunk);
  if (!one.ok() || !three.ok()) Fail("GzipCompress failed");
  std::string z, d, z3;
  if (!ZlibGunzip(*one, &z) || z != want) Fail("zlib does not inflate GzipCompress to its input");
  if (!ZlibGunzip(*three, &z3) || z3 != want) Fail("zlib does not inflate GzipCompress (3 threads) to its input");
  if (!DecoderGunzip(*one, 1 + data[0] % 61, 1 + data[0] % 97 * 37, &d) || d != want) {
    Fail("GzipDecoder does not inflate GzipCompress to its input");
  }

  const std::string raw(reinterpret_cast<const char*>(data), size);
  std::string a, b;
  const bool isal_ok = DecoderGunzip(raw, 4096, 1000, &a);
  const bool zlib_ok = ZlibGunzip(raw, &b);
  if (isal_ok && zlib_ok && a != b) Fail("GzipDecoder and zlib accept with different bytes");

  const spexd::core::FitsSizeLimits limits{.max_file_bytes = 1 << 20, .max_image_pixels = 1 << 18};
  const std::size_t base = SPEXD_HEAP_BYTES();
  std::size_t peak = base;
  auto sample = [&] {
    const std::size_t now = SPEXD_HEAP_BYTES();
    if (now > peak) peak = now;
    return false;
  };
  auto fits = spexd::core::InflateFits(raw, "fuzz.fits.gz", limits, sample, nullptr);
  sample();
  const auto code = fits.status().code();
  if (code != absl::StatusCode::kOk && code != absl::StatusCode::kInvalidArgument &&
      code != absl::StatusCode::kResourceExhausted) {
    Fail("InflateFits gave an unexpected status");
  }
  // Input held twice, the first 64 KiB step, the block at the limit twice while it grows
  // (1 MiB + two FITS blocks, each), and the decoder's state: nothing speculative, nothing
  // sized by the trailer's claim beyond the limit.
  const std::size_t bound = 2 * size + (std::size_t{64} << 10) + 2 * ((std::size_t{1} << 20) + 2 * 2880) +
                            (std::size_t{512} << 10);
  if (peak - base > bound) Fail("InflateFits peak heap over its bound");
  return 0;
}
