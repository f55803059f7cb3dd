// libFuzzer target: the parallel gzip inflation (core/io/internal/parallel_inflate.h) with
// chunks forced down to a few hundred bytes, so that every input crosses many chunk
// boundaries. Two checks per input:
//  - the input, compressed by zlib (level and strategy from its first byte), inflates to
//    itself in parallel, through ParallelInflate and InflateGzipInto;
//  - the input itself, taken as a gzip stream (mostly corrupt), gives InflateGzipInto the
//    same status and bytes with and without threads (the parallel path may only refuse,
//    never differ).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/base/parallel_for.h"
#include "core/io/internal/gzip.h"
#include "core/io/internal/parallel_inflate.h"

namespace {

std::string Compress(const uint8_t* data, size_t size, int level, int strategy) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, strategy) != Z_OK) std::abort();
  std::string out(deflateBound(&zs, size) + 64, '\0');
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  static spexd::core::TaskPool* pool = spexd::core::MakeTaskPool(2).release();
  spexd::core::internal::ParallelInflateOptions o;
  o.pool = pool;
  o.max_threads = 6;
  o.min_chunk_bytes = 64 + (data[0] & 0x7F) * 4;
  const int level = data[0] % 10;
  const int strategy = (data[0] >> 4) % 5;  // default, filtered, huffman only, rle, fixed
  const std::string gz = Compress(data + 1, size - 1, level, strategy);
  const std::string want(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string out(want.size() + 16, '\0');
  std::size_t in_used = 0, out_used = 0;
  if (spexd::core::internal::ParallelInflate(gz, out.data(), out.size(), o, &in_used, &out_used) &&
      (in_used != gz.size() || out.compare(0, out_used, want) != 0 || out_used != want.size())) {
    std::abort();
  }
  auto n = spexd::core::InflateGzipInto(gz, out.data(), out.size(), "fuzz.gz", {}, o);
  if (!n.ok() || *n != want.size() || out.compare(0, *n, want) != 0) std::abort();

  const std::string raw(reinterpret_cast<const char*>(data), size);
  std::string a(4 * size + 64, '\0'), b(a.size(), '\0');
  auto par = spexd::core::InflateGzipInto(raw, a.data(), a.size(), "fuzz.gz", {}, o);
  auto seq = spexd::core::InflateGzipInto(raw, b.data(), b.size(), "fuzz.gz");
  if (par.ok() != seq.ok() || par.status().message() != seq.status().message()) std::abort();
  if (par.ok() && (*par != *seq || a.compare(0, *par, b, 0, *seq) != 0)) std::abort();
  return 0;
}
