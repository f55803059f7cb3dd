// core/base/float_convert.h: each conversion gives its scalar loop's bits on every kind of
// value (normal, subnormal, zero of both signs, infinities, NaNs with payloads, values
// that round to float's overflow and underflow), at every length and misalignment around
// the vector width, whichever path this CPU takes.
#include "core/base/float_convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace spexd::core {
namespace {

std::vector<double> Doubles(std::size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const double special[] = {0.0,
                            -0.0,
                            1.0,
                            -1.5,
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN(),
                            -std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::signaling_NaN(),
                            std::numeric_limits<double>::denorm_min(),
                            1e-40,  // a float subnormal
                            1e-50,  // below float's range: rounds to 0
                            3.5e38,  // above float's range: rounds to inf
                            3.4028235677973366e38,  // FLT_MAX's rounding boundary
                            1.0000000596046448,  // a tie of float's rounding
                            1.0000001788139343};
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    if (r % 4 == 0) {
      v[i] = special[(r >> 8) % (sizeof(special) / sizeof(special[0]))];
    } else if (r % 4 == 1) {
      uint64_t bits = rng();  // any bit pattern, NaN payloads included
      std::memcpy(&v[i], &bits, 8);
    } else {
      v[i] = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0 - 0.5,
                        static_cast<int>(rng() % 280) - 140);
    }
  }
  return v;
}

// 4-byte words of any bit pattern (float NaNs, subnormals, infinities included).
std::string Words(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(4 * n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(FloatConvertTest, EveryPathGivesTheScalarBits) {
  std::printf("AVX2 path: %s\n", internal::FloatConvertUsesAvx2() ? "yes" : "no (scalar only)");
  for (std::size_t n : {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 4099}) {
    for (std::size_t offset : {0, 1, 3}) {  // misaligned sources and destinations
      SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset);
      const std::string words = std::string(offset, 'x') + Words(n, static_cast<uint32_t>(7 + n));
      const char* src = words.data() + offset;
      std::vector<float> f(n + offset), f_ref(n + offset);
      FromBigEndianFloat32(src, f.data() + offset, n);
      internal::FromBigEndianFloat32Scalar(src, f_ref.data() + offset, n);
      EXPECT_TRUE(SameBits(f, f_ref));
      std::vector<double> d(n + offset), d_ref(n + offset);
      FromBigEndianFloat32(src, d.data() + offset, n);
      internal::FromBigEndianFloat32Scalar(src, d_ref.data() + offset, n);
      EXPECT_TRUE(SameBits(d, d_ref));
      std::string be(4 * n + offset, '\0'), be_ref(4 * n + offset, '\0');
      EXPECT_EQ(ToBigEndianWords(src, n, be.data() + offset),
                internal::ToBigEndianWordsScalar(src, n, be_ref.data() + offset));
      EXPECT_EQ(be, be_ref);
      WidenFloat32(src, d.data() + offset, n);
      internal::WidenFloat32Scalar(src, d_ref.data() + offset, n);
      EXPECT_TRUE(SameBits(d, d_ref));

      const std::vector<double> values = Doubles(n + offset, 11 + static_cast<uint32_t>(n));
      std::vector<float> nf(n + offset), nf_ref(n + offset);
      NarrowToFloat32(values.data() + offset, nf.data() + offset, n);
      internal::NarrowToFloat32Scalar(values.data() + offset, nf_ref.data() + offset, n);
      EXPECT_TRUE(SameBits(nf, nf_ref));
      std::string out(4 * n + offset, '\0'), out_ref(4 * n + offset, '\0');
      const uint64_t sum = NarrowToBigEndianFloat32(values.data() + offset, n, out.data() + offset);
      const uint64_t sum_ref = internal::NarrowToBigEndianFloat32Scalar(values.data() + offset, n,
                                                                        out_ref.data() + offset);
      EXPECT_EQ(out, out_ref);
      EXPECT_EQ(sum, sum_ref);
    }
  }
}

// The scalar loops themselves: what static_cast and a byte swap give, value by value.
TEST(FloatConvertTest, ScalarLoopsAreTheConversions) {
  const double values[] = {1.0, -2.5, 1e-50, 3.5e38, 1.0000000596046448};
  char out[4 * 5];
  const uint64_t sum = internal::NarrowToBigEndianFloat32Scalar(values, 5, out);
  uint64_t expect_sum = 0;
  for (int i = 0; i < 5; ++i) {
    const float f = static_cast<float>(values[i]);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    expect_sum += u;
    const unsigned char* b = reinterpret_cast<const unsigned char*>(out + 4 * i);
    EXPECT_EQ((uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3], u);
    float back[1];
    internal::FromBigEndianFloat32Scalar(out + 4 * i, back, 1);
    EXPECT_EQ(std::memcmp(back, &f, 4), 0);
  }
  EXPECT_EQ(sum, expect_sum);
  // The words back, as the file holds them: each value's bytes reversed, summed as native.
  char words[4 * 5];
  EXPECT_EQ(internal::ToBigEndianWordsScalar(out, 5, words), [&] {
    uint64_t s = 0;
    for (int i = 0; i < 5; ++i) {
      uint32_t u;
      std::memcpy(&u, out + 4 * i, 4);
      s += u;
    }
    return s;
  }());
  for (int i = 0; i < 4 * 5; ++i) EXPECT_EQ(words[i], out[(i / 4) * 4 + 3 - i % 4]);
}

}  // namespace
}  // namespace spexd::core
