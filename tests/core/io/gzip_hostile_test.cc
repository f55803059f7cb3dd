// Crafted .fits.gz inputs that cost a decoder far more than their size unless its work is
// bounded: ~17 MB of empty stored blocks with an invalid block every 8 KiB, and blocks in
// which every 2 zero bits decode as a 258-byte copy. Each is refused within a second of
// CPU, with peak extra memory (resident set) under twice the file, from memory and from a
// descriptor.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/escaping.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"
#include "tests/peak_memory.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Cost {
  absl::Status status;
  double cpu_s = 0;
  int64_t extra_peak = -1;  // bytes over the resident set before the call; -1: unknown
};

template <typename F>
Cost Measure(F&& f) {
  Cost c;
  c.extra_peak = testing::PeakExtraResident([&] {
    const double t0 = ThreadCpuSeconds();
    c.status = f();
    c.cpu_s = ThreadCpuSeconds() - t0;
  });
  return c;
}

void ExpectRefusedCheaply(const std::string& gz, absl::StatusCode code, const std::string& message) {
  const std::string path = testing::MakeTempDir() + "/crafted.fits.gz";
  ASSERT_TRUE(testing::WriteBytes(path, gz));
  for (bool by_path : {false, true}) {
    SCOPED_TRACE(by_path ? "from a descriptor" : "from memory");
    const Cost c = Measure([&]() -> absl::Status {
      if (!by_path) return InflateFits(gz, "crafted.fits.gz", {}, {}, nullptr).status();
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return absl::InternalError("open");
      absl::Status s = InflateFitsFd(fd, path, {}, {}, nullptr).status();
      close(fd);
      return s;
    });
    std::printf("%s, %zu bytes: %.3f s CPU, peak extra resident %lld bytes: %s\n",
                by_path ? "by path" : "in memory", gz.size(), c.cpu_s,
                static_cast<long long>(c.extra_peak), c.status.ToString().c_str());
    EXPECT_EQ(c.status.code(), code) << c.status;
    EXPECT_NE(c.status.message().find(message), std::string::npos) << c.status;
    // Printable text: the message reaches clients as a gRPC status, which they read as UTF-8.
    for (char ch : c.status.message()) {
      ASSERT_TRUE(ch >= 0x20 && ch < 0x7f) << "byte " << static_cast<int>(static_cast<unsigned char>(ch))
                                           << " in " << absl::CHexEscape(c.status.message());
    }
    EXPECT_LT(c.cpu_s, 1.0);
    if (c.extra_peak >= 0) {
      EXPECT_LT(c.extra_peak, 2 * static_cast<int64_t>(gz.size())) << "peak extra resident bytes";
    }
  }
}

TEST(HostileGzip, StoredBlockFloodIsRefusedAtTheFirstInvalidBlock) {
  // 17 MB; the trailer claims 16x that (believed for the block size: the block is taken
  // only once the primary header has been checked, which never happens here).
  const std::string gz = gzip_test::StoredBlockFlood(17u << 20, 0xFFFFFFFFu);
  ExpectRefusedCheaply(gz, absl::StatusCode::kInvalidArgument, "corrupt gzip data");
  std::string plausible = gzip_test::StoredBlockFlood(17u << 20, 16u * (17u << 20));
  ExpectRefusedCheaply(plausible, absl::StatusCode::kInvalidArgument, "corrupt gzip data");
}

TEST(HostileGzip, CopyFloodIsRefusedAfterItsFirstStep) {
  // What the stream is: its first MiB inflates (zlib) to zeros at 1032 bytes a byte.
  const std::string gz = gzip_test::CopyFlood(16u << 20, 4u << 20, 16u * (16u << 20));
  {
    z_stream zs{};
    ASSERT_EQ(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
    std::string out(64u << 20, '\1');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
    zs.avail_in = 1u << 20;
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(inflate(&zs, Z_NO_FLUSH), Z_OK);
    EXPECT_EQ(zs.total_out, out.size());  // 64 MiB from < 64 KiB of input
    EXPECT_LT(zs.total_in, 70000u);
    EXPECT_EQ(out.find_first_not_of('\0'), std::string::npos);
    inflateEnd(&zs);
  }
  ExpectRefusedCheaply(gz, absl::StatusCode::kInvalidArgument, "not a FITS file");
}

// With a valid primary header declaring what the limits allow, the copies are the image's
// data: the output stops at what the headers declare (then the next header is not FITS),
// and at the byte limit when the headers declare more than it.
TEST(HostileGzip, CopyFloodBehindAFitsHeaderStopsAtTheDeclaredSize) {
  const FitsSizeLimits limits{.max_file_bytes = 64 << 20, .max_image_pixels = int64_t{1} << 28};
  const std::string header = gzip_test::FitsImageHeader(1024, 1024);  // 4 MiB of data
  // The header as stored blocks, then the flood (its literal 0 and copies are the data).
  std::string deflate;
  deflate += '\0';  // stored block, not final
  deflate += static_cast<char>(header.size() & 0xff);
  deflate += static_cast<char>(header.size() >> 8);
  deflate += static_cast<char>(~header.size() & 0xff);
  deflate += static_cast<char>((~header.size() >> 8) & 0xff);
  deflate += header;
  deflate += gzip_test::CopyFloodBlockStart();
  deflate.append(8u << 20, '\0');
  const std::string gz = gzip_test::GzipAround(deflate, 0);
  const Cost c = Measure([&] { return GunzipFits(gz, "f.fits.gz", limits).status(); });
  // 4 MiB of data, then zeros where the next header should start: the FITS file ends
  // there and what follows is counted against the byte limit as it inflates.
  EXPECT_EQ(c.status.code(), absl::StatusCode::kResourceExhausted) << c.status;
  EXPECT_NE(c.status.message().find("inflates to more than"), std::string::npos) << c.status;
  EXPECT_LT(c.cpu_s, 1.0);
  if (c.extra_peak >= 0) {
    EXPECT_LT(c.extra_peak, int64_t{16} << 20);
  }
}

// Found by fuzzing (tests/fuzz/regressions/preproc/): a gzip of a small preproc whose
// deflate data was mutated into an invalid back-reference. ISA-L 2.30 reports the error
// with an input count larger than the input it was given (wrapped round), and the decoder
// used that count before looking at the error: absl's hardened string_view trapped (SIGILL),
// which in a server is a crash from one file. Now an INVALID_ARGUMENT, in memory and by path.
TEST(HostileGzip, AnErrorWhoseInputCountIsWrongIsRefused) {
  std::ifstream f(std::string(SPEXD_TEST_DATA_DIR) +
                      "/../fuzz/regressions/preproc/isal-error-hands-back-more-input-than-given.fits.gz",
                  std::ios::binary);
  ASSERT_TRUE(f.good());
  std::stringstream read;
  read << f.rdbuf();
  const std::string gz = read.str();
  const std::string path = testing::MakeTempDir() + "/crafted.fits.gz";
  ASSERT_TRUE(testing::WriteBytes(path, gz));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const absl::Status by_path = InflateFitsFd(fd, path, {}, {}, nullptr).status();
  close(fd);
  const absl::Status in_memory = InflateFits(gz, "crafted.fits.gz", {}, {}, nullptr).status();
  for (const absl::Status& s : {in_memory, by_path}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("corrupt gzip data"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace spexd::core
