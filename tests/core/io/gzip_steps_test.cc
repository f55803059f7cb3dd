// .fits.gz inflation in steps (ISA-L, core/io/internal/gzip.h GzipDecoder, and
// core/io/fits_gunzip.h InflateFits): what it accepts (members, padding, any step size),
// what it refuses (corrupt, truncated, lying trailers), when it polls `stop`, how its block
// is sized; and the chunked parallel writer (GzipCompress), whose streams zlib, Python's
// gzip module and astropy read back to the same bytes.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using gzip_test::FitsImageHeader;
using gzip_test::Gzip;
using gzip_test::NoiseBytes;
using gzip_test::ZlibDeflate;

// A primary HDU declaring a `width` x `height` float32 image; with `data`, its data follow
// (noise, padded to whole blocks), otherwise only the header.
std::string ImageFits(long width, long height, bool data) {
  const std::string h = FitsImageHeader(width, height);
  if (!data) return h;
  const std::size_t bytes = static_cast<std::size_t>(width * height * 4);
  std::string d = NoiseBytes(bytes, 11);
  d.resize((bytes + 2879) / 2880 * 2880, '\0');
  return h + d;
}

void SetTrailerSize(std::string* gz, uint32_t isize) {
  for (int i = 0; i < 4; ++i) {
    (*gz)[gz->size() - 4 + static_cast<std::size_t>(i)] = static_cast<char>(isize >> (8 * i));
  }
}

// `gz` through a GzipDecoder fed `in_piece` bytes at a time, writing at most `out_step`
// bytes a call.
absl::StatusOr<std::string> DecodeInSteps(const std::string& gz, std::size_t in_piece,
                                          std::size_t out_step) {
  GzipDecoder d("s.gz");
  std::string out;
  std::string buf(out_step, '\0');
  for (std::size_t at = 0; at < gz.size(); at += in_piece) {
    absl::string_view piece = absl::string_view(gz).substr(at, in_piece);
    while (!piece.empty()) {
      const std::size_t before = piece.size();
      auto n = d.Decode(&piece, buf.data(), buf.size());
      if (!n.ok()) return n.status();
      out.append(buf.data(), *n);
      if (*n == 0 && piece.size() == before) return absl::InternalError("no progress");
    }
  }
  if (absl::Status s = d.Finish(); !s.ok()) return s;
  return out;
}

// zlib's inflation of a gzip stream (one member) or an error.
absl::StatusOr<std::string> ZlibGunzip(const std::string& gz, std::size_t expect) {
  std::string out(expect + 1, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return absl::InternalError("inflateInit2");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int r = inflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  const bool all_input = zs.avail_in == 0;
  inflateEnd(&zs);
  if (r != Z_STREAM_END || !all_input) return absl::InvalidArgumentError(absl::StrCat("zlib: ", r));
  return out;
}

TEST(GzipDecoder, AnyStepSizeMembersAndNulPadding) {
  const std::string a = NoiseBytes(300000, 1), b = NoiseBytes(70000, 2);
  const std::string two = Gzip(a) + ZlibDeflate(b, 16 + MAX_WBITS, 9) + std::string(512, '\0');
  for (std::size_t in_piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, two.size()}) {
    for (std::size_t out_step : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
      if (in_piece == 1 && out_step == 1) continue;  // slow, and covered by the others
      auto out = DecodeInSteps(two, in_piece, out_step);
      ASSERT_TRUE(out.ok()) << out.status() << " in " << in_piece << " out " << out_step;
      EXPECT_TRUE(*out == a + b) << "in " << in_piece << " out " << out_step;
    }
  }
  auto junk = DecodeInSteps(Gzip(a) + std::string(8, '\0') + "junk", 4096, 65536);
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument) << junk.status();
  EXPECT_NE(junk.status().message().find("data after the gzip stream"), std::string::npos);
  // Bytes that cannot open a member, right after one (gzip -d's "trailing garbage"), in
  // one piece or byte by byte; a lone 1f waits for its second byte, then is judged.
  for (const std::string& tail : {std::string("garbage\n"), std::string("\x1f\x01xyz")}) {
    for (std::size_t in_piece : {std::size_t{1}, std::size_t{4096}}) {
      auto after = DecodeInSteps(Gzip(a) + tail, in_piece, 65536);
      EXPECT_EQ(after.status().code(), absl::StatusCode::kInvalidArgument) << after.status();
      EXPECT_NE(after.status().message().find("not a gzip member"), std::string::npos)
          << after.status() << " in " << in_piece;
    }
  }
  auto empty = DecodeInSteps("", 4096, 65536);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument) << empty.status();
}

// At a member's end ISA-L hands back the bytes its bit buffer read past the trailer: with
// the input cut at every byte around the end, each piece in a buffer of its own (as
// InflateFitsFd's reads are), the stream decodes the same, and nothing before a piece is
// read (ASan: heap-buffer-overflow; Abseil's hardened string_view: a trap).
TEST(GzipDecoder, MemberEndsCutAnywhereInBuffersOfTheirOwn) {
  const std::string a = NoiseBytes(20000, 7), b = NoiseBytes(3000, 8);
  const std::string ga = Gzip(a), gb = ZlibDeflate(b, 16 + MAX_WBITS, 6);
  for (const std::string& tail : {gb, std::string(7, '\0'), gb + std::string(3, '\0')}) {
    const std::string two = ga + tail;
    const std::string expect = tail[0] == '\0' ? a : a + b;
    for (std::size_t cut = ga.size() - 24; cut <= ga.size() + 12 && cut < two.size(); ++cut) {
      for (std::size_t out_step : {std::size_t{1} << 20, std::size_t{5000}}) {
        GzipDecoder d("s.gz");
        std::string out, buf(out_step, '\0');
        absl::Status st;
        for (const auto& [from, to] : {std::pair<std::size_t, std::size_t>{0, cut}, {cut, two.size()}}) {
          const auto piece = std::make_unique<std::string>(two.substr(from, to - from));
          absl::string_view in(*piece);
          while (st.ok() && !in.empty()) {
            auto n = d.Decode(&in, buf.data(), buf.size());
            if (!n.ok()) st = n.status(); else out.append(buf.data(), *n);
          }
        }
        if (st.ok()) st = d.Finish();
        ASSERT_TRUE(st.ok()) << st << " cut " << cut << " of " << ga.size();
        EXPECT_TRUE(out == expect) << "cut " << cut << " of " << ga.size();
      }
    }
  }
}

TEST(GzipDecoder, CorruptTruncatedAndLyingTrailersAreInvalidArgument) {
  const std::string a = NoiseBytes(200000, 4);
  const std::string gz = Gzip(a);
  std::string corrupt = gz;
  for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) corrupt[i] ^= 0x5A;
  std::string crc = gz;
  crc[crc.size() - 6] ^= 1;
  std::string larger = gz, smaller = gz;
  SetTrailerSize(&larger, static_cast<uint32_t>(a.size() + 2880));
  SetTrailerSize(&smaller, static_cast<uint32_t>(a.size() - 2880));
  for (const std::string& bad : {corrupt, crc, larger, smaller}) {
    auto out = DecodeInSteps(bad, 65536, 65536);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_NE(out.status().message().find("s.gz: corrupt gzip data"), std::string::npos) << out.status();
  }
  for (const std::string& cut : {gz.substr(0, gz.size() / 2), gz.substr(0, gz.size() - 1), gz.substr(0, 5)}) {
    auto out = DecodeInSteps(cut, 65536, 65536);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_NE(out.status().message().find("truncated gzip data"), std::string::npos) << out.status();
  }
}

// The writer: one member of independent chunks, on any number of threads, inflating to the
// input with zlib and with the decoder, for sizes around the chunk size.
TEST(GzipCompress, ChunkedMemberInflatesToTheInputOnAnyThreads) {
  auto pool = MakeTaskPool(3);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096},
                        std::size_t{4097}, std::size_t{50000}}) {
    const std::string data = NoiseBytes(n, static_cast<uint32_t>(n + 3));
    auto one = GzipCompress(data, nullptr, 1, 4096);
    auto many = GzipCompress(data, pool.get(), 4, 4096);
    ASSERT_TRUE(one.ok() && many.ok());
    EXPECT_EQ(GzipTrailerSize(*one), n);
    EXPECT_EQ(GzipTrailerSize(*many), n);
    for (const std::string* gz : {&*one, &*many}) {
      auto z = ZlibGunzip(*gz, n);
      ASSERT_TRUE(z.ok()) << z.status() << " n " << n;
      EXPECT_TRUE(*z == data) << n;
    }
    auto d = DecodeInSteps(*one, 1000, 3000);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(*d == data) << n;
  }
}

// The same input gives the same member whatever thread compresses which chunk: a retried
// request's .fits.gz output must be the same file. The data repeat (as image rows do), so
// that the compressor finds matches and any state one chunk left behind would show.
TEST(GzipCompress, SameBytesWhicheverThreadsCompressTheChunks) {
  std::string data;
  const std::string row = NoiseBytes(1500, 7);
  for (int i = 0; data.size() < 600000; ++i) {
    data += row.substr(static_cast<std::size_t>(i * 37) % 700, 800);
    data += NoiseBytes(300, static_cast<uint32_t>(i));
  }
  auto pool = MakeTaskPool(3);
  auto first = GzipCompress(data, nullptr, 1, 16384);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int round = 0; round < 6; ++round) {
    auto again = GzipCompress(data, pool.get(), 2 + round % 3, 16384);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(*again == *first) << "round " << round;
  }
}

// A FITS file written in the default 1 MiB chunks, as spexd writes .fits.gz frames, read by
// Python's gzip module and by astropy: the same bytes, the same HDU.
TEST(GzipCompress, PythonGzipAndAstropyReadTheChunkedStream) {
  if (std::system("/usr/bin/python3 -c 'import gzip, astropy.io.fits' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with astropy (Debian python3-astropy); not installed";
  }
  const std::string fits = ImageFits(1200, 1000, true);  // 4.8 MB: five chunks
  auto pool = MakeTaskPool(2);
  auto gz = GzipCompress(fits, pool.get(), 3);
  ASSERT_TRUE(gz.ok());
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(testing::WriteBytes(dir + "/a.fits", fits));
  ASSERT_TRUE(testing::WriteBytes(dir + "/a.fits.gz", *gz));
  const std::string script = dir + "/check.py";
  ASSERT_TRUE(testing::WriteBytes(script,
      "import gzip, sys, numpy\n"
      "from astropy.io import fits\n"
      "plain = open(sys.argv[1], 'rb').read()\n"
      "assert gzip.decompress(open(sys.argv[2], 'rb').read()) == plain, 'gzip module'\n"
      "with gzip.open(sys.argv[2]) as f: assert f.read() == plain, 'gzip.open'\n"
      "a, b = fits.open(sys.argv[1]), fits.open(sys.argv[2])\n"
      "assert a[0].data.shape == b[0].data.shape == (1000, 1200)\n"
      "assert numpy.array_equal(a[0].data, b[0].data, equal_nan=True)\n"
      "print('same')\n"));
  const std::string cmd = absl::StrCat("/usr/bin/python3 ", script, " ", dir, "/a.fits ", dir, "/a.fits.gz 2>&1");
  const spexd::testing::CommandResult run = spexd::testing::RunCommand(cmd);
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("same"), std::string::npos) << run.output;
  // zlib too.
  auto z = ZlibGunzip(*gz, fits.size());
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_TRUE(*z == fits);
}

// A frame file's chunks, deflated frame after frame, write into memory already mapped: the
// second round takes the first round's buffers (no page faults for the compressed bytes),
// and the chunks still inflate to their input.
TEST(DeflateGzipChunk, OutputMemoryIsReusedOnceTheChunksGo) {
  constexpr int kChunks = 16;
  const std::string data = NoiseBytes(kGzipChunkBytes * kChunks, 5);
  auto round = [&](std::vector<GzipChunk>* chunks) {
    for (int i = 0; i < kChunks; ++i) {
      auto c = DeflateGzipChunk(absl::string_view(data).substr(i * kGzipChunkBytes, kGzipChunkBytes),
                                i + 1 == kChunks);
      ASSERT_TRUE(c.ok()) << c.status();
      chunks->push_back(*std::move(c));
    }
  };
  auto faults = [] {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
  };
  std::vector<GzipChunk> first;
  round(&first);
  first.clear();  // the buffers go back for the next chunks
  std::vector<GzipChunk> second;
  const long before = faults();
  round(&second);
  const long during = faults() - before;
  // Without reuse each chunk's ~1 MiB of output is faulted in afresh: 16 x 256 pages.
  EXPECT_LT(during, 256) << "minor page faults while deflating " << kChunks << " chunks";
  std::vector<const GzipChunk*> order;
  std::string member;
  for (const GzipChunk& c : second) order.push_back(&c);
  const GzipMemberEnds ends = MemberEndsOf(order);
  member.append(ends.header, sizeof(ends.header));
  for (const GzipChunk& c : second) member.append(c.view().data(), c.view().size());
  member.append(ends.trailer, sizeof(ends.trailer));
  // Not a FITS file: zlib checks the stream and gives the bytes back.
  z_stream zs{};
  ASSERT_EQ(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
  std::string out(data.size() + 1, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(member.data());
  zs.avail_in = static_cast<uInt>(member.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  inflateEnd(&zs);
  EXPECT_TRUE(out == data);
}

TEST(WholeInflateCapacity, OnlyForPlausibleTrailers) {
  const FitsSizeLimits limits;  // 1 GiB, 2^28 pixels
  EXPECT_EQ(WholeInflateCapacity(60'000'000, 136'270'080, limits), 136'270'080);
  EXPECT_EQ(WholeInflateCapacity(1000, 16000, limits), 16000);   // ratio 16: believed
  EXPECT_EQ(WholeInflateCapacity(1000, 17000, limits), 0);       // ratio 17: a bomb's
  EXPECT_EQ(WholeInflateCapacity(1000, 2879, limits), 0);        // under one FITS block
  EXPECT_EQ(WholeInflateCapacity(int64_t{1} << 30, 0xFFFFFFFFu, limits), 0);  // over the limit
  const FitsSizeLimits small{.max_file_bytes = 1 << 20, .max_image_pixels = 1 << 20};
  EXPECT_EQ(WholeInflateCapacity(100000, 1 << 20, small), 1 << 20);
  EXPECT_EQ(WholeInflateCapacity(100000, (1 << 20) + 1, small), 0);
}

TEST(InflateFits, PollsStopBetweenStepsFromMemoryAndFromADescriptor) {
  const std::string fits = ImageFits(1500, 1500, true);  // 9 MB: a 64 KiB step, then 4 MiB ones
  const std::string gz = Gzip(fits + std::string(100, '\0'));  // bytes after the last HDU
  int polls = 0;
  auto out = GunzipFits(gz, "w.fits.gz", {}, [&] { ++polls; return false; });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(*out == fits);
  EXPECT_GE(polls, 4);
  for (int stop_at : {1, 2, polls}) {
    int n = 0;
    auto stopped = GunzipFits(gz, "w.fits.gz", {}, [&] { return ++n == stop_at; });
    EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
    EXPECT_EQ(n, stop_at);
  }
  // From a descriptor, at an offset.
  const std::string path = testing::MakeTempDir() + "/w.fits.gz";
  ASSERT_TRUE(testing::WriteBytes(path, "xyz" + gz));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(lseek(fd, 3, SEEK_SET), 3);
  int fd_polls = 0;
  auto from_fd = GunzipFitsFd(fd, path, {}, [&] { ++fd_polls; return false; });
  close(fd);
  ASSERT_TRUE(from_fd.ok()) << from_fd.status();
  EXPECT_TRUE(*from_fd == fits);
  EXPECT_GE(fd_polls, 4);
}

// Into blocks of a pool (as spexd's loaders): whole FITS blocks, the file's bytes, the block
// reused by the next file.
TEST(InflateFits, InflatesIntoAPooledBlock) {
  const std::string fits = ImageFits(700, 600, true);
  const std::string gz = Gzip(fits);
  PlaneBufferPool buffers(int64_t{1} << 30);
  for (int round = 0; round < 2; ++round) {
    auto out = InflateFits(gz, "p.fits.gz", {}, {}, &buffers);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_FALSE(out->block.empty());
    EXPECT_TRUE(out->view() == fits);
    EXPECT_GE(out->block.capacity_bytes(), (fits.size() + 2879) / 2880 * 2880);
  }
  EXPECT_GE(buffers.reused(), 1);
}

TEST(InflateFits, MembersPaddingAndLyingTrailersGrowTheBlock) {
  const std::string fits = ImageFits(300, 200, true);
  const std::string a = fits.substr(0, 2880 * 40), b = fits.substr(2880 * 40);
  std::string small_claim = Gzip(fits), absurd = Gzip(fits);
  SetTrailerSize(&small_claim, 2880);
  SetTrailerSize(&absurd, 0xFFFFFFF0u);
  // Two members (the last ISIZE holds only the second), NUL padding (ISIZE reads 0).
  for (const std::string& gz : {Gzip(a) + Gzip(b), Gzip(fits) + std::string(700, '\0')}) {
    auto out = GunzipFits(gz, "w.fits.gz", {});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(*out == fits);
  }
  // A trailer that lies is found out by the decoder's length check.
  for (const std::string& lying : {small_claim, absurd}) {
    auto out = GunzipFits(lying, "w.fits.gz", {});
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_NE(out.status().message().find("corrupt gzip data"), std::string::npos) << out.status();
  }
}

TEST(InflateFits, CorruptTruncatedAndCutFits) {
  const std::string gz = Gzip(ImageFits(300, 200, true));
  std::string corrupt = gz;
  for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) corrupt[i] ^= 0x5A;
  auto bad = GunzipFits(corrupt, "w.fits.gz", {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("corrupt gzip data"), std::string::npos) << bad.status();
  auto cut = GunzipFits(gz.substr(0, gz.size() / 2), "w.fits.gz", {});
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument) << cut.status();
  EXPECT_NE(cut.status().message().find("truncated gzip data"), std::string::npos) << cut.status();
  const std::string fits = ImageFits(300, 200, true);
  auto cut_fits = GunzipFits(Gzip(fits.substr(0, fits.size() - 2 * 2880)), "w.fits.gz", {});
  EXPECT_EQ(cut_fits.status().code(), absl::StatusCode::kInvalidArgument) << cut_fits.status();
  EXPECT_NE(cut_fits.status().message().find("truncated FITS"), std::string::npos) << cut_fits.status();
}

TEST(InflateFits, BombsAreRefusedFromTheirHeaders) {
  // 16 MiB of zeros after a header declaring 40 GB: refused before the data inflate.
  const std::string bomb = Gzip(ImageFits(100000, 100000, false) + std::string(16 << 20, '\0'));
  auto out = GunzipFits(bomb, "bomb.fits.gz", {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_NE(out.status().message().find("refused from its header before decompressing"),
            std::string::npos) << out.status();
  // Declared HDU sizes over a smaller byte limit.
  const FitsSizeLimits small{.max_file_bytes = 1 << 20, .max_image_pixels = int64_t{1} << 28};
  auto big = GunzipFits(Gzip(ImageFits(1000, 1000, false) + NoiseBytes(300000, 7)), "b.gz", small);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_NE(big.status().message().find("declare more than"), std::string::npos) << big.status();
  // Bytes after the last HDU beyond the limit: counted while inflated, and refused.
  auto tail = GunzipFits(Gzip(ImageFits(100, 100, true) + std::string(2 << 20, '\0')), "t.gz", small);
  EXPECT_EQ(tail.status().code(), absl::StatusCode::kResourceExhausted) << tail.status();
  EXPECT_NE(tail.status().message().find("inflates to more than"), std::string::npos) << tail.status();
}

// A gzip header with FHCRC (RFC 1952 §2.3.1) whose CRC-16 is wrong is reported as that, not
// as a data CRC; a wrong data CRC-32 keeps its own words. From memory and in small pieces.
TEST(InflateFits, AWrongHeaderCrcHasItsOwnWords) {
  const std::string fits = ImageFits(40, 30, true);
  z_stream zs{};
  ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  gz_header header{};
  header.hcrc = 1;
  header.name = reinterpret_cast<Bytef*>(const_cast<char*>("w.fits"));
  ASSERT_EQ(deflateSetHeader(&zs, &header), Z_OK);
  std::string gz(fits.size() + 4096, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(fits.data()));
  zs.avail_in = static_cast<uInt>(fits.size());
  zs.next_out = reinterpret_cast<Bytef*>(gz.data());
  zs.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  gz.resize(zs.total_out);
  deflateEnd(&zs);
  ASSERT_TRUE(GunzipFits(gz, "w.fits.gz", {}).ok());
  std::string bad_header = gz;
  bad_header[10 + 7] ^= 0x01;  // the CRC-16 after the 10 fixed bytes and "w.fits\0"
  std::string bad_data = gz;
  bad_data[gz.size() - 6] ^= 0x01;  // the data's CRC-32
  for (const auto& [bytes, words] : {std::pair{&bad_header, "FHCRC"},
                                     std::pair{&bad_data, "CRC-32 or length does not match"}}) {
    auto out = GunzipFits(*bytes, "w.fits.gz", {});
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_NE(out.status().message().find(words), std::string::npos) << out.status();
    GzipDecoder decoder("w.fits.gz");
    std::string sink(1 << 20, '\0');
    absl::Status st;
    for (std::size_t at = 0; at < bytes->size() && st.ok(); at += 3) {
      absl::string_view piece = absl::string_view(*bytes).substr(at, 3);
      while (!piece.empty() && st.ok()) {
        const std::size_t before = piece.size();
        st = decoder.Decode(&piece, sink.data(), sink.size()).status();
        if (piece.size() == before) break;
      }
    }
    if (st.ok()) st = decoder.Finish();
    EXPECT_NE(st.message().find(words), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace spexd::core
