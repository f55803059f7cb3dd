// The speculative parallel inflation (core/io/internal/parallel_inflate.h): byte-identical
// to libdeflate for every kind of deflate stream zlib writes, with small forced chunks so
// that a few hundred KB exercise many chunk boundaries; chunks really chain (the stats say
// so: a pass through the sequential fallback alone would hide a broken chunk decoder);
// corrupt and truncated members are refused, never crash, and InflateGzipInto's statuses
// are the same with and without threads.
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/parallel_for.h"
#include "core/io/fits_gunzip.h"
#include "core/io/inflate_share.h"
#include "core/io/internal/gzip.h"
#include "core/io/internal/parallel_inflate.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"

namespace spexd::core {
namespace {

using internal::ParallelInflate;
using internal::ParallelInflateOptions;
using internal::ParallelInflateStats;

// One gzip member of `data` written by zlib at `level` with `strategy`.
// memLevel 1 ends a block every 128 symbols.
std::string ZlibGzip(const std::string& data, int level, int strategy = Z_DEFAULT_STRATEGY,
                     int mem_level = 8) {
  return gzip_test::ZlibDeflate(data, 16 + MAX_WBITS, level, strategy, mem_level);
}

// Float-like noise with runs, text-like repeats and copies from 20-32 KiB back, so that
// chunk boundaries fall inside matches that reach into the previous chunk's window.
std::string MixedBytes(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s;
  s.reserve(n + 300);
  while (s.size() < n) {
    switch (rng() % 4) {
      case 0:
        for (int i = 0; i < 400; ++i) s.push_back(static_cast<char>(rng() & 0x1F));
        break;
      case 1:
        s.append(50 + rng() % 200, static_cast<char>(rng()));
        break;
      case 2:
        s.append("SIMPLE  =                    T / conforming FITS file  ");
        break;
      default:
        if (s.size() > 32768) {
          const std::size_t back = 20000 + rng() % 12768, len = 3 + rng() % 255;
          for (std::size_t i = 0; i < len; ++i) s.push_back(s[s.size() - back]);
        }
    }
  }
  s.resize(n);
  return s;
}

struct Result {
  bool ok = false;
  std::string out;
  ParallelInflateStats stats;
};

Result Parallel(const std::string& gz, std::size_t capacity, TaskPool* pool, bool pair,
                std::size_t chunk = 4096) {
  Result r;
  ParallelInflateOptions o;
  o.pool = pool;
  o.pair_chunks = pair;
  o.max_threads = 8;
  o.min_chunk_bytes = chunk;
  o.stats = &r.stats;
  r.out.assign(capacity, '\0');
  std::size_t in_used = 0, out_used = 0;
  r.ok = ParallelInflate(gz, r.out.data(), capacity, o, &in_used, &out_used);
  if (r.ok) {
    EXPECT_EQ(in_used, gz.size());
    r.out.resize(out_used);
  }
  return r;
}

// Each test with one chunk a thread and with two, interleaved (pair_chunks). The loader's
// path (InflateFits) takes the default, two.
class ParallelInflateTest : public ::testing::TestWithParam<bool> {
 protected:
  bool pair() const { return GetParam(); }
  std::unique_ptr<TaskPool> pool_ = MakeTaskPool(3);
};

INSTANTIATE_TEST_SUITE_P(ChunksAThread, ParallelInflateTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Two" : "One"; });

TEST_P(ParallelInflateTest, MatchesTheInputAtEveryLevelWithManyChunks) {
  for (const std::size_t size : {std::size_t{70000}, std::size_t{300001}, std::size_t{2000000}}) {
    const std::string data = MixedBytes(size, static_cast<uint32_t>(size));
    for (const int level : {1, 6, 9}) {
      SCOPED_TRACE(::testing::Message() << "size " << size << " level " << level);
      const std::string gz = ZlibGzip(data, level);
      const Result r = Parallel(gz, data.size() + 10, pool_.get(), pair(), gz.size() / 9);
      ASSERT_TRUE(r.ok);
      EXPECT_TRUE(r.out == data);
      // Nine by size, at most the 8 threads' 8 chunks, or 16 two a thread.
      EXPECT_EQ(r.stats.chunks, pair() ? 9 : 8);
      // Blocks of zlib's default memLevel hold 16K symbols: at most a few per chunk here,
      // so a chunk may find none; most must chain.
      if (size >= 300000) {
        EXPECT_GE(r.stats.chunks_used, 4);
      }
    }
  }
}

TEST_P(ParallelInflateTest, ChunksChainOnFloatLikeData) {
  const std::string data = gzip_test::NoiseBytes(4000000, 5);
  const std::string gz = ZlibGzip(data, 1);
  const Result r = Parallel(gz, data.size(), pool_.get(), pair(), gz.size() / 8);
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.out == data);
  EXPECT_EQ(r.stats.chunks_used, r.stats.chunks - 1);
  EXPECT_LT(r.stats.sequential_bytes, data.size() / 8);
}

// Chunks whose output is smaller than a window: a chunk's markers then resolve from
// several chunks before it.
TEST_P(ParallelInflateTest, ChunksSmallerThanAWindowChain) {
  const std::string data = MixedBytes(120000, 21);
  const std::string gz = ZlibGzip(data, 6, Z_DEFAULT_STRATEGY, 1);
  const Result r = Parallel(gz, data.size(), pool_.get(), pair(), gz.size() / 8);
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.out == data);
  EXPECT_EQ(r.stats.chunks, 8);
  EXPECT_GE(r.stats.chunks_used, 6);
}

TEST_P(ParallelInflateTest, StoredBlocksAreFoundAndCopied) {
  const std::string data = MixedBytes(1000000, 7);
  const std::string gz = ZlibGzip(data, 0);
  const Result r = Parallel(gz, data.size(), pool_.get(), pair(), 60000);
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.out == data);
  EXPECT_GE(r.stats.chunks_used, 4);
}

TEST_P(ParallelInflateTest, FixedHuffmanAndFilteredAndRleStrategies) {
  const std::string data = MixedBytes(600000, 9);
  for (const int strategy : {Z_FIXED, Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE}) {
    SCOPED_TRACE(strategy);
    const Result r = Parallel(ZlibGzip(data, 6, strategy), data.size(), pool_.get(), pair());
    ASSERT_TRUE(r.ok);
    EXPECT_TRUE(r.out == data);
  }
}

// The decoder's fast loop and its edges (inflate_huffman.cc): matches of every distance
// from 1 (a broadcast) to 20 (overlapping 8-byte steps) and of every length to 258, after
// incompressible bytes, so that the chunks over the repeats produce several times their
// share of the output: their buffers grow where the fast loop hands over to the checked
// one, and every chunk must still chain. Byte for byte against libdeflate's output.
std::string RepeatsAfterNoise(std::size_t noise, std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s = gzip_test::NoiseBytes(noise, seed);
  while (s.size() < n) {
    for (int i = 0; i < 12; ++i) s.push_back(static_cast<char>(rng()));
    const std::size_t period = 1 + rng() % 20, len = 3 + rng() % (rng() % 4 == 0 ? 2000 : 300);
    for (std::size_t i = 0; i < len; ++i) s.push_back(s[s.size() - period]);
  }
  s.resize(n);
  return s;
}

TEST_P(ParallelInflateTest, FastLoopCopiesAndGrowingChunksMatchLibdeflate) {
  const std::string data = RepeatsAfterNoise(1500000, 7000000, 3);
  for (const int level : {1, 6, 9}) {
    for (const int strategy : {Z_DEFAULT_STRATEGY, Z_FIXED, Z_RLE}) {
      SCOPED_TRACE(::testing::Message() << "level " << level << " strategy " << strategy);
      const std::string gz = ZlibGzip(data, level, strategy);
      std::string libdeflate(data.size(), '\0');
      auto n = InflateGzipInto(gz, libdeflate.data(), libdeflate.size(), "repeats.gz");
      ASSERT_TRUE(n.ok()) << n.status();
      ASSERT_TRUE(libdeflate == data);
      // Capacity exactly the output: chunk 0 and the last matches run into its end.
      const Result r = Parallel(gz, data.size(), pool_.get(), pair(), gz.size() / 8);
      ASSERT_TRUE(r.ok);
      EXPECT_TRUE(r.out == libdeflate);
      EXPECT_EQ(r.stats.chunks, 8);
      // Fixed-Huffman blocks have no header that the search looks for: decoded in sequence.
      EXPECT_EQ(r.stats.chunks_used, strategy == Z_FIXED ? 0 : 7);
    }
  }
}

TEST_P(ParallelInflateTest, OneThreadOrNoPoolGivesTheSameBytes) {
  const std::string data = MixedBytes(500000, 11);
  const std::string gz = ZlibGzip(data, 6);
  const Result r = Parallel(gz, data.size(), nullptr, pair());
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.out == data);
}

TEST_P(ParallelInflateTest, ARealFitsFileMatchesLibdeflate) {
  std::ifstream f(std::string(SPEXD_TEST_DATA_DIR) + "/psf-r0-00051060.fits", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string fits = ss.str();
  ASSERT_GT(fits.size(), 1000000u);
  for (const int level : {1, 6}) {
    const std::string gz = ZlibGzip(fits, level);
    std::string want(fits.size(), '\0');
    auto n = InflateGzipInto(gz, want.data(), want.size(), "psf.gz");
    ASSERT_TRUE(n.ok()) << n.status();
    const Result r = Parallel(gz, fits.size(), pool_.get(), pair(), gz.size() / 6);
    ASSERT_TRUE(r.ok);
    EXPECT_TRUE(r.out == want);
    EXPECT_GE(r.stats.chunks_used, 1);
  }
}

TEST_P(ParallelInflateTest, OverCapacityIsRefusedWithoutWritingPastIt) {
  const std::string data = MixedBytes(400000, 13);
  const std::string gz = ZlibGzip(data, 6);
  std::string out(data.size() + 64, '\x5a');
  ParallelInflateOptions o;
  o.pool = pool_.get();
  o.max_threads = 8;
  o.pair_chunks = pair();
  o.min_chunk_bytes = 4096;
  std::size_t in_used = 0, out_used = 0;
  EXPECT_FALSE(ParallelInflate(gz, out.data(), data.size() - 1, o, &in_used, &out_used));
  EXPECT_EQ(out.substr(data.size() - 1), std::string(65, '\x5a'));
}

TEST_P(ParallelInflateTest, CorruptAndTruncatedMembersAreRefused) {
  const std::string data = MixedBytes(400000, 15);
  const std::string gz = ZlibGzip(data, 6);
  std::mt19937 rng(3);
  int refused = 0;
  for (int i = 0; i < 60; ++i) {
    std::string bad = gz;
    const std::size_t at = 20 + rng() % (bad.size() - 30);
    bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    const Result r = Parallel(bad, data.size() + 4096, pool_.get(), pair());
    // A flip that still decodes must give the same bytes (then the trailer matches);
    // otherwise the CRC-32 or the decoding refuses it.
    if (r.ok) {
      EXPECT_TRUE(r.out == data) << "flip at " << at;
    } else {
      ++refused;
    }
  }
  EXPECT_GE(refused, 55);
  for (const std::size_t keep : {gz.size() - 1, gz.size() - 8, gz.size() / 2, std::size_t{30}}) {
    EXPECT_FALSE(Parallel(gz.substr(0, keep), data.size(), pool_.get(), pair()).ok) << keep;
  }
}

// Through InflateGzipInto: several members (each large one in parallel), padding, and the
// same statuses with and without threads for corrupt, truncated and over-capacity input.
TEST_P(ParallelInflateTest, InflateGzipIntoKeepsItsContract) {
  const std::string a = MixedBytes(300000, 17), b = MixedBytes(5000, 18), c = MixedBytes(250000, 19);
  const std::string gz = ZlibGzip(a, 1) + ZlibGzip(b, 6) + ZlibGzip(c, 9) + std::string(100, '\0');
  ParallelInflateOptions o;
  o.pool = pool_.get();
  o.max_threads = 4;
  o.pair_chunks = pair();
  o.min_chunk_bytes = 8192;
  auto run = [&](const std::string& in, std::size_t cap, const ParallelInflateOptions& opt) {
    std::string out(cap, '\0');
    auto n = InflateGzipInto(in, out.data(), out.size(), "m.gz", {}, opt);
    if (n.ok()) out.resize(*n);
    return std::make_pair(n.status(), out);
  };
  const auto whole = run(gz, a.size() + b.size() + c.size(), o);
  ASSERT_TRUE(whole.first.ok()) << whole.first;
  EXPECT_TRUE(whole.second == a + b + c);
  std::string flipped = gz;
  flipped[gz.size() / 3] = static_cast<char>(flipped[gz.size() / 3] ^ 0x10);
  for (const auto& [in, cap] : {std::make_pair(flipped, a.size() + b.size() + c.size()),
                                std::make_pair(gz.substr(0, gz.size() / 2), a.size() + b.size() + c.size()),
                                std::make_pair(gz, a.size() + 10)}) {
    const auto par = run(in, cap, o);
    const auto seq = run(in, cap, ParallelInflateOptions{});
    EXPECT_FALSE(par.first.ok());
    EXPECT_EQ(par.first, seq.first);
  }
}

// The loader's path (InflateFits with the decode pool): a member over 8 MB compressed is
// inflated in 4 MB chunks, with the same bytes as without a pool.
TEST_P(ParallelInflateTest, InflateFitsWithAPoolGivesTheSameFile) {
  const long width = 2000, height = 2600;
  std::string fits = gzip_test::FitsImageHeader(width, height) +
                     gzip_test::NoiseBytes(static_cast<std::size_t>(width * height * 4), 23);
  fits.resize((fits.size() + 2879) / 2880 * 2880, '\0');
  const std::string gz = ZlibGzip(fits, 1);
  ASSERT_GT(gz.size(), std::size_t{8} << 20);
  auto par = InflateFits(gz, "big.fits.gz", FitsSizeLimits{}, {}, nullptr, pool_.get());
  ASSERT_TRUE(par.ok()) << par.status();
  EXPECT_TRUE(par->view() == fits);
  std::string cut = gz;
  cut[gz.size() / 2] = static_cast<char>(cut[gz.size() / 2] ^ 4);
  auto bad_par = InflateFits(cut, "big.fits.gz", FitsSizeLimits{}, {}, nullptr, pool_.get());
  auto bad_seq = InflateFits(cut, "big.fits.gz", FitsSizeLimits{}, {}, nullptr, nullptr);
  EXPECT_FALSE(bad_par.ok());
  EXPECT_EQ(bad_par.status(), bad_seq.status());
}

// With a share of the pool (core/io/inflate_share.h) crowded by other members, the loader's
// path splits the member into fewer chunks: the same file, the same error, and its claim is
// given back either way.
TEST_P(ParallelInflateTest, InflateFitsWithACrowdedShareGivesTheSameFile) {
  const long width = 2000, height = 2600;
  std::string fits = gzip_test::FitsImageHeader(width, height) +
                     gzip_test::NoiseBytes(static_cast<std::size_t>(width * height * 4), 29);
  fits.resize((fits.size() + 2879) / 2880 * 2880, '\0');
  const std::string gz = ZlibGzip(fits, 1);
  InflateShare share;
  std::vector<InflateShare::Claim> others;
  for (int i = 0; i < 7; ++i) others.push_back(share.Enter(pool_->num_threads() + 1));
  auto par = InflateFits(gz, "big.fits.gz", FitsSizeLimits{}, {}, nullptr, pool_.get(), &share);
  ASSERT_TRUE(par.ok()) << par.status();
  EXPECT_TRUE(par->view() == fits);
  EXPECT_EQ(share.active(), 7);
  std::string cut = gz;
  cut[gz.size() / 2] = static_cast<char>(cut[gz.size() / 2] ^ 4);
  auto bad = InflateFits(cut, "big.fits.gz", FitsSizeLimits{}, {}, nullptr, pool_.get(), &share);
  auto bad_seq = InflateFits(cut, "big.fits.gz", FitsSizeLimits{}, {}, nullptr, nullptr);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status(), bad_seq.status());
  EXPECT_EQ(share.active(), 7);
}

// Many small members: each is its own parallel call whose chunks past the member's end
// give up once chunk 0 has found it (the result is the same either way).
TEST_P(ParallelInflateTest, ManySmallMembersAndStop) {
  std::string gz, want;
  for (uint32_t i = 0; i < 40; ++i) {
    const std::string part = MixedBytes(20000 + i * 100, 100 + i);
    gz += ZlibGzip(part, static_cast<int>(i % 10));
    want += part;
  }
  ParallelInflateOptions o;
  o.pool = pool_.get();
  o.max_threads = 4;
  o.pair_chunks = pair();
  o.min_chunk_bytes = 2048;
  std::string out(want.size(), '\0');
  auto n = InflateGzipInto(gz, out.data(), out.size(), "many.gz", {}, o);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, want.size());
  EXPECT_TRUE(out == want);
  int polls = 0;
  auto stopped = InflateGzipInto(gz, out.data(), out.size(), "many.gz", [&] { return ++polls == 3; }, o);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(polls, 3);
}

}  // namespace
}  // namespace spexd::core
