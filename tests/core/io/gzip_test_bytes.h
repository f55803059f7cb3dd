// Byte inputs shared by the gzip and inflate tests (gzip_fits_test.cc, gzip_whole_test.cc,
// parallel_inflate_test.cc, inflate_decoder_test.cc).
#ifndef SPEXD_TESTS_CORE_GZIP_TEST_BYTES_H_
#define SPEXD_TESTS_CORE_GZIP_TEST_BYTES_H_

#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>

#include "core/io/internal/gzip.h"
#include "gtest/gtest.h"

namespace spexd::core::gzip_test {

// The gzip encoding of `bytes`; a failure to compress fails the test.
inline std::string Gzip(const std::string& bytes) {
  auto gz = GzipCompress(bytes);
  EXPECT_TRUE(gz.ok()) << gz.status();
  return gz.ok() ? *gz : std::string();
}

// `data` deflated by zlib with its window bits (negative: raw RFC 1951; 16 + 15: gzip),
// level, strategy and memLevel (1 ends a block every 128 symbols); a zlib failure fails
// the test.
inline std::string ZlibDeflate(const std::string& data, int window_bits, int level,
                               int strategy = Z_DEFAULT_STRATEGY, int mem_level = 8) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, level, Z_DEFLATED, window_bits, mem_level, strategy), Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// Compresses about 2:1, like float pixel data: random low bits, zero high bits.
inline std::string NoiseBytes(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0x0F);
  return s;
}

// The header block of a primary HDU declaring a `width` x `height` float32 image.
inline std::string FitsImageHeader(long width, long height) {
  std::string h;
  auto card = [&](const std::string& key, const std::string& value) {
    std::string c = key + std::string(8 - key.size(), ' ') + "= " +
                    std::string(20 - value.size(), ' ') + value;
    h += c + std::string(80 - c.size(), ' ');
  };
  card("SIMPLE", "T");
  card("BITPIX", "-32");
  card("NAXIS", "2");
  card("NAXIS1", std::to_string(width));
  card("NAXIS2", std::to_string(height));
  h += "END" + std::string(77, ' ');
  h.resize(2880, ' ');
  return h;
}

}  // namespace spexd::core::gzip_test

#endif  // SPEXD_TESTS_CORE_GZIP_TEST_BYTES_H_
