// Byte inputs shared by the gzip tests (gzip_fits_test.cc, gzip_steps_test.cc,
// gzip_hostile_test.cc) and the gzip fuzz target's seeds: plain data, and crafted streams
// that cost a decoder far more than their size unless it bounds its work.
#ifndef SPEXD_TESTS_CORE_GZIP_TEST_BYTES_H_
#define SPEXD_TESTS_CORE_GZIP_TEST_BYTES_H_

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

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

// Writes deflate bits (RFC 1951 §3.1.1: fields from their least significant bit, Huffman
// codes from their most significant bit).
class DeflateBits {
 public:
  void Field(uint32_t value, int bits) {
    for (int i = 0; i < bits; ++i) Bit((value >> i) & 1u);
  }
  void Code(uint32_t code, int bits) {
    for (int i = bits - 1; i >= 0; --i) Bit((code >> i) & 1u);
  }
  // Pads to a whole byte with zero bits (a stored block's LEN follows its header so).
  void Align() {
    while (nbits_ != 0) Bit(0);
  }
  // Bytes as they are; only at a byte boundary.
  void Raw(const std::string& bytes) { out_ += bytes; }
  std::size_t size() const { return out_.size(); }
  // Pads to a whole byte with zero bits.
  std::string Take() {
    if (nbits_ > 0) out_ += static_cast<char>(acc_);
    acc_ = 0;
    nbits_ = 0;
    std::string s;
    s.swap(out_);
    return s;
  }

 private:
  void Bit(uint32_t b) {
    acc_ |= b << nbits_;
    if (++nbits_ == 8) {
      out_ += static_cast<char>(acc_);
      acc_ = 0;
      nbits_ = 0;
    }
  }
  std::string out_;
  uint32_t acc_ = 0;
  int nbits_ = 0;
};

// A gzip header (no name, no time) + `deflate` + a trailer claiming CRC-32 0 and `isize`.
inline std::string GzipAround(const std::string& deflate, uint32_t isize) {
  std::string gz("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  gz += deflate;
  for (int i = 0; i < 4; ++i) gz += '\0';
  for (int i = 0; i < 4; ++i) gz += static_cast<char>((isize >> (8 * i)) & 0xffu);
  return gz;
}

// About `bytes` of deflate data that decode to nothing: empty stored blocks (00 00 00 FF FF),
// with a byte holding a final block of the reserved type 3 (0x07) every 8 KiB. A decoder
// that guesses block starts finds long chains of valid blocks from almost every bit.
inline std::string StoredBlockFlood(std::size_t bytes, uint32_t isize) {
  std::string d;
  d.reserve(bytes);
  while (d.size() < bytes) {
    for (std::size_t i = 0; i + 5 < 8192; i += 5) d.append("\x00\x00\x00\xff\xff", 5);
    d += '\x07';
  }
  return GzipAround(d, isize);
}

// The start of a dynamic-Huffman block (not final) in which the literal/length code is
// {285 (length 258): '0', literal 0: '10', end of block: '11'} and the distance code
// {0 (distance 1): '0', 1: '1'}, followed by the literal 0: every 2 zero bits after it then
// decode as a 258-byte copy of zeros (1032 bytes of output per input byte).
inline std::string CopyFloodBlockStart() {
  DeflateBits b;
  b.Field(0, 1);   // BFINAL
  b.Field(2, 2);   // BTYPE: dynamic Huffman
  b.Field(29, 5);  // HLIT: 286 literal/length codes
  b.Field(1, 5);   // HDIST: 2 distance codes
  b.Field(14, 4);  // HCLEN: 18 code length codes
  // Code length code lengths, in the order of RFC 1951 §3.2.7: 18 -> 1 bit ('0'),
  // 1 and 2 -> 2 bits ('10', '11').
  const int order[18] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1};
  for (int sym : order) b.Field(sym == 18 ? 1 : (sym == 1 || sym == 2) ? 2 : 0, 3);
  auto len2 = [&] { b.Code(3, 2); };
  auto len1 = [&] { b.Code(2, 2); };
  auto zeros = [&](int n) {  // code 18: 11-138 zero lengths
    b.Code(0, 1);
    b.Field(static_cast<uint32_t>(n - 11), 7);
  };
  len2();      // literal 0
  zeros(138);  // 1..138
  zeros(117);  // 139..255
  len2();      // 256, end of block
  zeros(28);   // 257..284
  len1();      // 285, length 258
  len1();      // distance code 0
  len1();      // distance code 1
  b.Code(2, 2);  // the literal 0
  return b.Take();
}

// About `bytes` of deflate data, a CopyFloodBlockStart at every `chunk` bytes and zero
// bytes between: a short input whose first block alone inflates 1032-fold.
inline std::string CopyFlood(std::size_t bytes, std::size_t chunk, uint32_t isize) {
  const std::string start = CopyFloodBlockStart();
  std::string d;
  d.reserve(bytes);
  while (d.size() < bytes) {
    d += start;
    d.append(std::min(chunk, bytes - std::min(bytes, d.size())), '\0');
  }
  return GzipAround(d, isize);
}

// One piece of a GzipOfParts stream: `bytes` as they are, then `zeros` zero bytes.
struct GzipPart {
  std::string bytes;
  uint64_t zeros = 0;
};

// CRC-32 of `n` zero bytes (zlib's crc32_combine, by doubling).
inline uLong ZerosCrc(uint64_t n) {
  uLong crc = 0, block = crc32(0L, reinterpret_cast<const Bytef*>("\0"), 1);
  uint64_t block_len = 1;
  while (n > 0) {
    if (n & 1u) crc = crc32_combine(crc, block, static_cast<z_off_t>(block_len));
    block = crc32_combine(block, block, static_cast<z_off_t>(block_len));
    block_len *= 2;
    n >>= 1;
  }
  return crc;
}

// A valid gzip member (true CRC-32 and ISIZE) whose output is `parts` in order: bytes in
// stored blocks, zeros as a literal 0 then 258-byte copies in the 2-bit code of
// CopyFloodBlockStart, the rest literals. A FITS file of headers and gigabytes of zero
// data in about a thousandth of its size, as a gzip encoder of long runs makes it.
inline std::string GzipOfParts(const std::vector<GzipPart>& parts) {
  DeflateBits b;
  uLong crc = 0;
  uint64_t total = 0;
  for (const GzipPart& part : parts) {
    for (std::size_t at = 0; at < part.bytes.size(); at += 65535) {
      const std::size_t n = std::min<std::size_t>(65535, part.bytes.size() - at);
      b.Field(0, 1);  // BFINAL
      b.Field(0, 2);  // BTYPE: stored
      b.Align();
      b.Field(static_cast<uint32_t>(n), 16);
      b.Field(static_cast<uint32_t>(~n & 0xffffu), 16);
      b.Raw(part.bytes.substr(at, n));
    }
    crc = crc32(crc, reinterpret_cast<const Bytef*>(part.bytes.data()),
                static_cast<uInt>(part.bytes.size()));
    total += part.bytes.size();
    if (part.zeros == 0) continue;
    // The block of CopyFloodBlockStart (its bits, written here at any bit position): the
    // literal 0 is '10', a 258-byte copy at distance 1 is '0' '0', end of block '11'.
    const uint64_t copies = (part.zeros - 1) / 258;
    const uint64_t rest = part.zeros - 1 - 258 * copies;
    b.Field(0, 1);   // BFINAL
    b.Field(2, 2);   // BTYPE: dynamic Huffman
    b.Field(29, 5);  // HLIT
    b.Field(1, 5);   // HDIST
    b.Field(14, 4);  // HCLEN
    const int order[18] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1};
    for (int sym : order) b.Field(sym == 18 ? 1 : (sym == 1 || sym == 2) ? 2 : 0, 3);
    auto zero_lengths = [&](int n) {
      b.Code(0, 1);
      b.Field(static_cast<uint32_t>(n - 11), 7);
    };
    b.Code(3, 2);  // literal 0: length 2
    zero_lengths(138);
    zero_lengths(117);
    b.Code(3, 2);  // 256 (end of block): length 2
    zero_lengths(28);
    b.Code(2, 2);  // 285 (length 258): length 1
    b.Code(2, 2);  // distance codes 0 and 1: length 1
    b.Code(2, 2);
    b.Code(2, 2);  // the literal 0
    for (uint64_t i = 0; i < copies; ++i) b.Code(0, 2);  // length 258, distance 1
    b.Code(3, 2);  // end of block
    // The rest as fixed-Huffman literals 0 (00110000), then end of block (0000000).
    b.Field(0, 1);
    b.Field(1, 2);
    for (uint64_t i = 0; i < rest; ++i) b.Code(0x30, 8);
    b.Code(0, 7);
    crc = crc32_combine(crc, ZerosCrc(part.zeros), static_cast<z_off_t>(part.zeros));
    total += part.zeros;
  }
  b.Field(1, 1);  // an empty final block (fixed Huffman: end of block)
  b.Field(1, 2);
  b.Code(0, 7);
  std::string gz("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  gz += b.Take();
  for (int i = 0; i < 4; ++i) gz += static_cast<char>((crc >> (8 * i)) & 0xffu);
  for (int i = 0; i < 4; ++i) gz += static_cast<char>((total >> (8 * i)) & 0xffu);
  return gz;
}

// One 80-byte header card holding `text`; an integer card "KEY = value".
inline std::string FitsCard(const std::string& text) {
  return text + std::string(80 - text.size(), ' ');
}
inline std::string FitsIntCard(const std::string& key, int64_t v) {
  const std::string n = std::to_string(v);
  return FitsCard(key + std::string(8 - key.size(), ' ') + "= " + std::string(20 - n.size(), ' ') + n);
}
// `header` padded with blanks to whole 2880-byte records; `n` data bytes so padded.
inline std::string PaddedHeader(std::string header) {
  header.resize((header.size() + 2879) / 2880 * 2880, ' ');
  return header;
}
inline int64_t PaddedDataBytes(int64_t n) { return (n + 2879) / 2880 * 2880; }

// The header of a float64 image HDU of `width` x `height` pixels: the primary HDU when
// `extname` is empty, else an IMAGE extension so named.
inline std::string Float64PlaneHeader(const std::string& extname, int64_t width, int64_t height) {
  std::string h = extname.empty() ? FitsCard("SIMPLE  =                    T")
                                  : FitsCard("XTENSION= 'IMAGE   '");
  h += FitsIntCard("BITPIX", -64) + FitsIntCard("NAXIS", 2) + FitsIntCard("NAXIS1", width) +
       FitsIntCard("NAXIS2", height);
  if (!extname.empty()) {
    h += FitsIntCard("PCOUNT", 0) + FitsIntCard("GCOUNT", 1);
    h += FitsCard("EXTNAME = '" + extname + "'");
  }
  return PaddedHeader(h + FitsCard("END"));
}

// `bytes` of a primary header whose END never comes: SIMPLE, BITPIX = 8, NAXIS = 0, then
// COMMENT cards (a file seen in the wild had 1000 MiB of them in a 3.4 MB .fits.gz).
inline std::string CommentBombFits(std::size_t bytes) {
  std::string fits = FitsCard("SIMPLE  =                    T") + FitsIntCard("BITPIX", 8) +
                     FitsIntCard("NAXIS", 0);
  const std::string comment = FitsCard("COMMENT the header goes on");
  fits.reserve(bytes + comment.size());
  while (fits.size() < bytes) fits += comment;
  return fits;
}

// `bytes` of the text "SIMPLE  = " over and over.
inline std::string RepeatedSimpleFits(std::size_t bytes) {
  std::string fits;
  fits.reserve(bytes + 10);
  while (fits.size() < bytes) fits += "SIMPLE  = ";
  return fits;
}

// A well-formed .fits.gz of under 1 MB holding two 8000 x 8192 float64 images of zeros,
// the primary HDU and IVAR, and no IMAGE: 1 GB of FITS within the default limits.
inline std::string ZeroPlanesWithoutImageGz() {
  const uint64_t plane = static_cast<uint64_t>(PaddedDataBytes(int64_t{8192} * 8000 * 8));
  return GzipOfParts({{Float64PlaneHeader("", 8192, 8000), plane},
                      {Float64PlaneHeader("IVAR", 8192, 8000), plane}});
}

}  // namespace spexd::core::gzip_test

#endif  // SPEXD_TESTS_CORE_GZIP_TEST_BYTES_H_
