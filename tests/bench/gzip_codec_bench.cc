// Single-core gzip codec speeds on one FITS file, for choosing the libraries and level that
// spexd reads and writes .fits.gz with (docs/service.md "gzip in and out"):
//   inflate  zlib (streaming), libdeflate (one call into a buffer of the output's size) and
//            ISA-L (isal_inflate, streaming in 4 MiB output steps, as core/io/internal/gzip.cc);
//   deflate  zlib levels 1 and 6, libdeflate 1/4/6, ISA-L 0-3 over the whole file, and ISA-L
//            in independent 1/2/4 MiB chunks (the parallel writer's split: what it costs in size).
// Each codec's output is checked against the file (inflated or re-inflated) before it is timed.
//   spexd_gzip_codec_bench FILE(.fits or .fits.gz) [--repeats N]
// Prints one line per codec: seconds per file (the fastest of N), MB/s of uncompressed bytes,
// and for deflate the compressed size as a fraction of the file.
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string ReadFile(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

double Best(int repeats, const std::function<void()>& f) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "gzip_codec_bench: %s\n", what);
  std::exit(1);
}

// zlib, streaming into `out` (sized to the output).
std::size_t ZlibInflate(const std::string& gz, std::string* out) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) Die("inflateInit2");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  zs.next_out = reinterpret_cast<Bytef*>(out->data());
  zs.avail_out = static_cast<uInt>(out->size());
  const int r = inflate(&zs, Z_FINISH);
  const std::size_t n = zs.total_out;
  inflateEnd(&zs);
  if (r != Z_STREAM_END) Die("zlib inflate");
  return n;
}

std::size_t IsalInflate(const std::string& gz, std::string* out) {
  inflate_state st;
  isal_inflate_init(&st);
  st.crc_flag = ISAL_GZIP;
  st.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(gz.data()));
  st.avail_in = static_cast<uint32_t>(gz.size());
  std::size_t done = 0;
  constexpr std::size_t kStep = std::size_t{4} << 20;
  while (st.block_state != ISAL_BLOCK_FINISH) {
    const std::size_t room = std::min(kStep, out->size() - done);
    if (room == 0) Die("isal: output larger than expected");
    st.next_out = reinterpret_cast<uint8_t*>(out->data() + done);
    st.avail_out = static_cast<uint32_t>(room);
    if (isal_inflate(&st) != ISAL_DECOMP_OK) Die("isal_inflate");
    done += room - st.avail_out;
    if (st.avail_out == room && st.avail_in == 0 && st.block_state != ISAL_BLOCK_FINISH) Die("isal: truncated");
  }
  return done;
}

std::string ZlibDeflate(const std::string& raw, int level) {
  uLongf n = compressBound(static_cast<uLong>(raw.size())) + 64;
  std::string out(n, '\0');
  z_stream zs{};
  deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) Die("zlib deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string LibdeflateDeflate(const std::string& raw, int level) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(level);
  std::string out(libdeflate_gzip_compress_bound(c, raw.size()), '\0');
  out.resize(libdeflate_gzip_compress(c, raw.data(), raw.size(), out.data(), out.size()));
  libdeflate_free_compressor(c);
  if (out.empty()) Die("libdeflate compress");
  return out;
}

const uint32_t kIsalLevelBuf[] = {0, ISAL_DEF_LVL1_DEFAULT, ISAL_DEF_LVL2_DEFAULT, ISAL_DEF_LVL3_DEFAULT};

// ISA-L raw deflate of raw[begin, end) as an independent piece (flush FULL_FLUSH unless last).
std::string IsalDeflatePiece(const char* data, std::size_t n, int level, bool last,
                             std::vector<uint8_t>* level_buf) {
  isal_zstream zs;
  isal_deflate_stateless_init(&zs);
  zs.level = static_cast<uint32_t>(level);
  level_buf->resize(std::max<uint32_t>(1, kIsalLevelBuf[level]));
  zs.level_buf = level_buf->data();
  zs.level_buf_size = kIsalLevelBuf[level];
  zs.end_of_stream = last ? 1 : 0;
  zs.flush = last ? NO_FLUSH : FULL_FLUSH;
  zs.gzip_flag = IGZIP_DEFLATE;
  std::string out(n + n / 16 + 1024, '\0');
  zs.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(data));
  zs.avail_in = static_cast<uint32_t>(n);
  zs.next_out = reinterpret_cast<uint8_t*>(out.data());
  zs.avail_out = static_cast<uint32_t>(out.size());
  if (isal_deflate_stateless(&zs) != COMP_OK) Die("isal_deflate_stateless");
  out.resize(zs.total_out);
  return out;
}

// One gzip member of independent chunks of `chunk` bytes (0: the whole file as one piece).
std::string IsalGzip(const std::string& raw, int level, std::size_t chunk) {
  std::vector<uint8_t> level_buf;
  static const unsigned char kHeader[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
  std::string out(reinterpret_cast<const char*>(kHeader), 10);
  if (chunk == 0) chunk = raw.size();
  for (std::size_t at = 0; at < raw.size(); at += chunk) {
    const std::size_t n = std::min(chunk, raw.size() - at);
    out += IsalDeflatePiece(raw.data() + at, n, level, at + n == raw.size(), &level_buf);
  }
  const uint32_t crc = crc32_gzip_refl(0, reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  const uint32_t isize = static_cast<uint32_t>(raw.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((crc >> (8 * i)) & 0xff);
  for (int i = 0; i < 4; ++i) out += static_cast<char>((isize >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Die("usage: spexd_gzip_codec_bench FILE [--repeats N]");
  int repeats = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
  }
  const std::string file = ReadFile(argv[1]);
  if (file.size() < 2) Die("empty file");
  const bool gz = static_cast<unsigned char>(file[0]) == 0x1f && static_cast<unsigned char>(file[1]) == 0x8b;
  // The uncompressed bytes: the file, or its inflation (its ISIZE trailer sizes the buffer:
  // this is a trusted local file).
  std::string raw;
  if (gz) {
    uint32_t isize = 0;
    std::memcpy(&isize, file.data() + file.size() - 4, 4);
    raw.resize(isize);
    raw.resize(ZlibInflate(file, &raw));
  } else {
    raw = file;
  }
  const double mb = static_cast<double>(raw.size()) / 1e6;
  std::printf("file %s: %.1f MB uncompressed%s\n", argv[1], mb,
              gz ? (", " + std::to_string(file.size()) + " bytes gzip").c_str() : "");
  auto row = [&](const char* what, double s, double ratio) {
    if (ratio > 0) {
      std::printf("%-34s %8.4f s  %7.1f MB/s  size %.4f of the file\n", what, s, mb / s, ratio);
    } else {
      std::printf("%-34s %8.4f s  %7.1f MB/s\n", what, s, mb / s);
    }
  };

  // Inflate each codec's input: the file itself when it is gzip, and zlib level 6's (as
  // desispec's Python gzip writes) in any case.
  std::vector<std::pair<std::string, std::string>> inputs;
  if (gz) inputs.emplace_back("the file", file);
  inputs.emplace_back("zlib level 6", ZlibDeflate(raw, 6));
  std::string out(raw.size(), '\0');
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  for (const auto& [name, in] : inputs) {
    std::printf("inflate (%s, %.3f of the file):\n", name.c_str(), static_cast<double>(in.size()) / static_cast<double>(raw.size()));
    auto check = [&](std::size_t n) {
      if (n != raw.size() || std::memcmp(out.data(), raw.data(), n) != 0) Die("inflated bytes differ");
      std::memset(out.data(), 0, out.size());
    };
    check(ZlibInflate(in, &out));
    row("  zlib inflate", Best(repeats, [&] { ZlibInflate(in, &out); }), 0);
    std::size_t n = 0;
    if (libdeflate_gzip_decompress(d, in.data(), in.size(), out.data(), out.size(), &n) != LIBDEFLATE_SUCCESS) {
      Die("libdeflate");
    }
    check(n);
    row("  libdeflate (one call)", Best(repeats, [&] {
          libdeflate_gzip_decompress(d, in.data(), in.size(), out.data(), out.size(), &n);
        }), 0);
    check(IsalInflate(in, &out));
    row("  ISA-L isal_inflate (4 MiB steps)", Best(repeats, [&] { IsalInflate(in, &out); }), 0);
  }
  libdeflate_free_decompressor(d);

  std::printf("deflate (one core):\n");
  auto verify = [&](const std::string& g) {
    std::string back(raw.size(), '\0');
    if (ZlibInflate(g, &back) != raw.size() || back != raw) Die("deflated stream does not inflate back");
  };
  for (int level : {1, 6}) {
    std::string g;
    const double s = Best(repeats, [&] { g = ZlibDeflate(raw, level); });
    verify(g);
    row(("  zlib level " + std::to_string(level)).c_str(), s, static_cast<double>(g.size()) / static_cast<double>(raw.size()));
  }
  for (int level : {1, 4, 6}) {
    std::string g;
    const double s = Best(repeats, [&] { g = LibdeflateDeflate(raw, level); });
    verify(g);
    row(("  libdeflate level " + std::to_string(level)).c_str(), s, static_cast<double>(g.size()) / static_cast<double>(raw.size()));
  }
  for (int level = 0; level <= 3; ++level) {
    for (std::size_t chunk : {std::size_t{0}, std::size_t{1} << 20, std::size_t{2} << 20, std::size_t{4} << 20}) {
      std::string g;
      const double s = Best(repeats, [&] { g = IsalGzip(raw, level, chunk); });
      verify(g);
      const std::string what = "  ISA-L level " + std::to_string(level) +
                               (chunk == 0 ? std::string(", whole") : ", " + std::to_string(chunk >> 20) + " MiB chunks");
      row(what.c_str(), s, static_cast<double>(g.size()) / static_cast<double>(raw.size()));
    }
  }
  return 0;
}
