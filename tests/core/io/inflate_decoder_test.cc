// The deflate block decoder (core/io/internal/inflate_huffman.h) and its fast loop
// (inflate_fast.h), with both builds of the loop (plain and BMI2, where the CPU has it):
// raw deflate streams decoded block by block against libdeflate byte for byte, with the
// output's room ending at every point near the fast loop's bound (exactly full, one
// short, the loop's margin either side) and inputs shorter and longer than the loop's
// 16 bytes; corrupt streams give the same status and bytes from both builds, and never
// bytes that libdeflate would not give; the parallel inflater with each build; two
// streams decoded in turn (DecodeBytesPair: the paired fast loop) give what each gives
// alone, statuses, bytes and where they stop included.
#include <libdeflate.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/base/parallel_for.h"
#include "core/io/internal/inflate_fast.h"
#include "core/io/internal/inflate_huffman.h"
#include "core/io/internal/inflate_pair.h"
#include "core/io/internal/parallel_inflate.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"

namespace spexd::core::internal {
namespace {

// Raw deflate (RFC 1951, no gzip wrapper) of `data` by zlib.
std::string RawDeflate(const std::string& data, int level, int strategy = Z_DEFAULT_STRATEGY) {
  return gzip_test::ZlibDeflate(data, -MAX_WBITS, level, strategy);
}

// Matches at every distance from 1 to 40 (each of the loop's copy kinds: a broadcast,
// 2-7, 8-15 and 16 or more symbols back) and every length to 258, between literals.
std::string Repeats(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n) {
    for (int i = 0, k = static_cast<int>(rng() % 24); i < k; ++i) s.push_back(static_cast<char>(rng() % 96));
    const std::size_t back = 1 + rng() % 40, len = 3 + rng() % (rng() % 3 == 0 ? 400 : 40);
    if (back > s.size()) continue;
    for (std::size_t i = 0; i < len; ++i) s.push_back(s[s.size() - back]);
  }
  s.resize(n);
  return s;
}

struct Decoded {
  InflateStatus status = InflateStatus::kOk;
  std::string out;
};

// Decodes `raw` block by block into `cap` bytes of room; checks that nothing past the
// room was written.
Decoded Decode(const std::string& raw, std::size_t cap) {
  constexpr std::size_t kCanary = 64;
  std::vector<uint8_t> buf(cap + kCanary, 0xA5);
  BitReader in(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
  in.Seek(0);
  BlockDecoder dec;
  InflateOutput<uint8_t> o;
  o.data = buf.data();
  o.cap = cap;
  Decoded d;
  bool final = false;
  do {
    d.status = dec.ReadHeader(in, &final);
    if (d.status == InflateStatus::kOk) d.status = dec.DecodeBody(in, o);
  } while (d.status == InflateStatus::kOk && !final);
  for (std::size_t i = cap; i < buf.size(); ++i) {
    EXPECT_EQ(buf[i], 0xA5) << "written past the room at " << i - cap;
  }
  d.out.assign(reinterpret_cast<const char*>(buf.data()), o.pos);
  return d;
}

// A stream's decoding by a ByteRun (inflate_pair.h), and where it stopped.
struct StreamRun {
  std::string raw;
  std::vector<uint8_t> buf;
  BitReader in;
  BlockDecoder dec;
  InflateOutput<uint8_t> out;
  ByteRun run;
  static constexpr std::size_t kCanary = 64;
  StreamRun(const std::string& stream, std::size_t cap, uint64_t stop_bit = UINT64_MAX)
      : raw(stream), buf(cap + kCanary, 0xA5), in(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()) {
    in.Seek(0);
    out.data = buf.data();
    out.cap = cap;
    run = ByteRun{&in, &dec, &out, stop_bit};
  }
  StreamRun(const StreamRun&) = delete;
  StreamRun& operator=(const StreamRun&) = delete;
  // The result, having checked that nothing past the room was written.
  Decoded Result() const {
    for (std::size_t i = out.cap; i < buf.size(); ++i) EXPECT_EQ(buf[i], 0xA5) << "past the room at " << i;
    return Decoded{run.status, std::string(reinterpret_cast<const char*>(buf.data()), out.pos)};
  }
};

// Two streams decoded in turn; each must give what it gives alone (Decode), and stop at
// the same bit.
void ExpectPairAsAlone(const std::string& a, std::size_t cap_a, const std::string& b, std::size_t cap_b) {
  StreamRun pa(a, cap_a), pb(b, cap_b);
  DecodeBytesPair(pa.run, pb.run);
  for (const auto& [stream, cap, paired] : {std::make_tuple(a, cap_a, &pa), std::make_tuple(b, cap_b, &pb)}) {
    StreamRun alone(stream, cap);
    DecodeBytesAlone(alone.run);
    const Decoded want = Decode(stream, cap), got = paired->Result(), one = alone.Result();
    ASSERT_EQ(got.status, want.status);
    ASSERT_TRUE(got.out == want.out);
    ASSERT_EQ(one.status, want.status);
    ASSERT_TRUE(one.out == want.out);
    EXPECT_EQ(paired->in.BitPos(), alone.in.BitPos());
    EXPECT_EQ(paired->run.final, alone.run.final);
  }
}

// libdeflate's raw inflate into `cap` bytes: its result code and output.
int Libdeflate(const std::string& raw, std::size_t cap, std::string* out) {
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  out->assign(cap, '\0');
  std::size_t n = 0;
  const libdeflate_result r = libdeflate_deflate_decompress(d, raw.data(), raw.size(), out->data(), cap, &n);
  libdeflate_free_decompressor(d);
  out->resize(r == LIBDEFLATE_SUCCESS ? n : 0);
  return static_cast<int>(r);
}

// Runs `body` once per build of the fast loop that this CPU can run, then puts back the
// default (BMI2 where the CPU has it).
template <typename Body>
void ForEachBuild(Body body) {
  for (const bool bmi2 : {false, true}) {
    if (UseBmi2FastLoop(bmi2) != bmi2) {
      std::printf("this CPU has no BMI2: only the plain build is tested\n");
      continue;
    }
    ASSERT_EQ(Bmi2FastLoopInUse(), bmi2);
    SCOPED_TRACE(bmi2 ? "BMI2 build" : "plain build");
    body();
  }
  UseBmi2FastLoop(true);
}

TEST(InflateDecoderTest, MatchesLibdeflateAtEveryLevelAndStrategy) {
  const std::string data = Repeats(3000000, 5);
  ForEachBuild([&] {
    for (const int level : {1, 6, 9}) {
      for (const int strategy : {Z_DEFAULT_STRATEGY, Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE, Z_FIXED}) {
        SCOPED_TRACE(::testing::Message() << "level " << level << " strategy " << strategy);
        const std::string raw = RawDeflate(data, level, strategy);
        std::string ref;
        ASSERT_EQ(Libdeflate(raw, data.size(), &ref), LIBDEFLATE_SUCCESS);
        const Decoded d = Decode(raw, data.size());
        EXPECT_EQ(d.status, InflateStatus::kOk);
        EXPECT_TRUE(d.out == ref);
      }
    }
  });
}

// The output's room ending at every point around the fast loop's bound: the loop must
// hand over to the checked one in time, the checked one must fill the room exactly, and a
// stream too long for the room must be kNoRoom with everything before the symbol that did
// not fit written. The room ends at the stream's end, and also in its middle, inside a
// run of 258-byte matches of one copy kind (16-byte moves, 8-byte moves, a broadcast)
// whose moves' overrun past the match must stay inside the room (the input's last 16
// bytes, where the checked loop decodes anyway, would hide that at the end).
TEST(InflateDecoderTest, RoomEndingNearTheFastLoopsBound) {
  ForEachBuild([&] {
    for (const std::size_t back : {20, 10, 1}) {
      std::string data = Repeats(20000, 9);
      for (std::size_t i = 0; i < 3000; ++i) data.push_back(data[data.size() - back]);
      data += Repeats(20000, 10);
      const std::string raw = RawDeflate(data, back == 10 ? 1 : 9);
      for (std::size_t slack = 0; slack <= kFastOutRoom + 40; ++slack) {
        SCOPED_TRACE(::testing::Message() << "back " << back << " room " << data.size() + slack);
        const Decoded d = Decode(raw, data.size() + slack);
        ASSERT_EQ(d.status, InflateStatus::kOk);
        ASSERT_TRUE(d.out == data);
      }
      for (const std::size_t end : {data.size(), std::size_t{21000}}) {
        for (std::size_t short_by = 1; short_by <= kFastOutRoom + 40; ++short_by) {
          const std::size_t room = end - short_by;
          SCOPED_TRACE(::testing::Message() << "back " << back << " room " << room);
          const Decoded d = Decode(raw, room);
          ASSERT_EQ(d.status, InflateStatus::kNoRoom);
          ASSERT_LE(d.out.size(), room);
          ASSERT_GT(d.out.size() + 258, room);
          ASSERT_TRUE(d.out == data.substr(0, d.out.size()));
        }
      }
    }
  });
}

// Streams of 1 to ~100 bytes: the fast loop's 16 bytes of input are there for some and
// not for others, and the last refills read past the end (as zeros).
TEST(InflateDecoderTest, ShortStreamsAroundTheFastLoopsInputRoom) {
  const std::string text = Repeats(4000, 13);
  ForEachBuild([&] {
    for (std::size_t n = 0; n <= 600; n += (n < 100 ? 1 : 7)) {
      const std::string data = text.substr(0, n);
      for (const int level : {1, 9}) {
        SCOPED_TRACE(::testing::Message() << "size " << n << " level " << level);
        const std::string raw = RawDeflate(data, level, n % 2 == 0 ? Z_DEFAULT_STRATEGY : Z_FIXED);
        for (const std::size_t room : {n, n + kFastOutRoom}) {
          const Decoded d = Decode(raw, room);
          ASSERT_EQ(d.status, InflateStatus::kOk);
          ASSERT_TRUE(d.out == data);
        }
      }
    }
  });
}

// Corrupt streams (a flipped bit, a cut): both builds agree on the status and the bytes,
// and a stream the decoder accepts is one libdeflate accepts with the same bytes.
TEST(InflateDecoderTest, CorruptStreamsGiveTheSameResultFromBothBuilds) {
  const std::string data = Repeats(60000, 21);
  const std::string raw = RawDeflate(data, 6);
  std::mt19937 rng(4);
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = raw;
    if (trial % 4 == 3) {
      bad.resize(rng() % raw.size());
    } else {
      bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    const std::size_t room = data.size() + 1000;
    std::vector<Decoded> results;
    ForEachBuild([&] { results.push_back(Decode(bad, room)); });
    ASSERT_FALSE(results.empty());
    for (const Decoded& d : results) {
      SCOPED_TRACE(::testing::Message() << "trial " << trial);
      EXPECT_EQ(d.status, results[0].status);
      EXPECT_TRUE(d.out == results[0].out);
      if (d.status == InflateStatus::kOk) {
        std::string ref;
        EXPECT_EQ(Libdeflate(bad, room, &ref), LIBDEFLATE_SUCCESS);
        EXPECT_TRUE(d.out == ref);
      }
    }
  }
}

// The parallel inflater (16-bit chunks with window markers, then bytes) with each build.
TEST(InflateDecoderTest, ParallelInflateWithEachBuildMatchesLibdeflate) {
  const std::string data = Repeats(4000000, 17);
  std::unique_ptr<TaskPool> pool = MakeTaskPool(3);
  for (const int level : {1, 6}) {
    const std::string gz = gzip_test::ZlibDeflate(data, 16 + MAX_WBITS, level);
    ForEachBuild([&] {
      ParallelInflateOptions o;
      o.pool = pool.get();
      o.max_threads = 8;
      o.min_chunk_bytes = gz.size() / 8;
      ParallelInflateStats stats;
      o.stats = &stats;
      std::string out(data.size(), '\0');
      std::size_t in_used = 0, out_used = 0;
      ASSERT_TRUE(ParallelInflate(gz, out.data(), out.size(), o, &in_used, &out_used));
      EXPECT_EQ(out_used, data.size());
      EXPECT_TRUE(out == data);
      EXPECT_EQ(stats.chunks, 8);
      EXPECT_GE(stats.chunks_used, 4);
    });
  }
}

// Pairs of every level and strategy (stored blocks, fixed and dynamic codes, Huffman-only
// literal runs), of different lengths, so that either stream may end first.
TEST(InflateDecoderTest, PairedStreamsGiveWhatEachGivesAlone) {
  const std::string x = Repeats(700000, 31), y = Repeats(450000, 32);
  std::vector<std::string> streams;
  for (const int level : {0, 1, 6, 9}) {
    for (const int strategy : {Z_DEFAULT_STRATEGY, Z_HUFFMAN_ONLY, Z_FIXED}) {
      streams.push_back(RawDeflate(streams.size() % 2 == 0 ? x : y, level, strategy));
    }
  }
  ForEachBuild([&] {
    for (std::size_t i = 0; i < streams.size(); ++i) {
      const std::string& a = streams[i];
      const std::string& b = streams[(i * 5 + 3) % streams.size()];
      SCOPED_TRACE(::testing::Message()
                   << "streams " << i << " and " << (i * 5 + 3) % streams.size());
      const std::size_t na = i % 2 == 0 ? x.size() : y.size();
      const std::size_t nb = ((i * 5 + 3) % streams.size()) % 2 == 0 ? x.size() : y.size();
      ExpectPairAsAlone(a, na, b, nb);
    }
  });
}

// One stream's room ending around the fast loop's bound (so that it leaves the paired loop
// for the checked one, fills its room or runs out of it) beside a stream with room to spare.
TEST(InflateDecoderTest, PairedStreamWithItsRoomEndingNearTheBound) {
  std::string data = Repeats(20000, 9);
  for (std::size_t i = 0; i < 3000; ++i) data.push_back(data[data.size() - 20]);
  data += Repeats(20000, 10);
  const std::string raw = RawDeflate(data, 9), other = RawDeflate(Repeats(90000, 33), 6);
  ForEachBuild([&] {
    for (std::size_t room = data.size() - kFastOutRoom - 20; room <= data.size() + kFastOutRoom + 20; room += 3) {
      SCOPED_TRACE(::testing::Message() << "room " << room);
      ExpectPairAsAlone(raw, room, other, 90000);
      ExpectPairAsAlone(other, 90000, raw, room);
    }
  });
}

// A flipped bit or a cut in one stream: its status and bytes as alone, and the other
// stream decoded whole.
TEST(InflateDecoderTest, PairedCorruptStreamGivesWhatItGivesAlone) {
  const std::string data = Repeats(60000, 21), good_data = Repeats(80000, 22);
  const std::string raw = RawDeflate(data, 6), good = RawDeflate(good_data, 1);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bad = raw;
    if (trial % 4 == 3) {
      bad.resize(rng() % raw.size());
    } else {
      bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    if (trial % 2 == 0) {
      ExpectPairAsAlone(bad, data.size() + 1000, good, good_data.size());
    } else {
      ExpectPairAsAlone(good, good_data.size(), bad, data.size() + 1000);
    }
  }
}

// A run that stops at the first block boundary at or after stop_bit stops there paired too.
TEST(InflateDecoderTest, PairedRunsStopWhereTheyStopAlone) {
  const std::string raw = RawDeflate(Repeats(2000000, 41), 6), other = RawDeflate(Repeats(1500000, 42), 1);
  for (const uint64_t stop : {uint64_t{1}, uint64_t{raw.size() * 2}, uint64_t{raw.size() * 4}}) {
    StreamRun a(raw, 2000000, stop), b(other, 1500000, stop / 2), alone_a(raw, 2000000, stop),
        alone_b(other, 1500000, stop / 2);
    DecodeBytesPair(a.run, b.run);
    DecodeBytesAlone(alone_a.run);
    DecodeBytesAlone(alone_b.run);
    for (const auto& [p, q] : {std::make_pair(&a, &alone_a), std::make_pair(&b, &alone_b)}) {
      SCOPED_TRACE(::testing::Message() << "stop " << stop);
      EXPECT_EQ(p->run.status, InflateStatus::kOk);
      EXPECT_FALSE(p->run.final);
      EXPECT_GE(p->in.BitPos(), p->run.stop_bit);
      EXPECT_EQ(p->in.BitPos(), q->in.BitPos());
      EXPECT_TRUE(p->Result().out == q->Result().out);
    }
  }
}

}  // namespace
}  // namespace spexd::core::internal
