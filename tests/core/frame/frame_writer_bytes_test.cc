// core::FrameToFits / ModelToFits (HDUs built in parallel, data encoded and summed in
// chunks) against the serial CFITSIO writer they replaced (internal/frame_writer_reference.h):
// the same bytes, CHECKSUM/DATASUM included, for every thread count.
// The reference stamps each HDU's checksum comments with CFITSIO's clock; the new writer
// is given the same time (FitsWriteOptions::checksum_time) so that whole files compare.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <limits>
#include <utility>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/base/float_convert.h"
#include "core/base/parallel_for.h"
#include "core/frame/frame_writer.h"
#include "core/frame/internal/fits_checksum.h"
#include "core/frame/internal/frame_writer_reference.h"
#include "core/io/fits_file.h"
#include "gtest/gtest.h"
#include "tests/frame_fixtures.h"

namespace spexd::core {
namespace {

using spexd::testing::MakeTestFibermap;
using spexd::testing::MakeTestFrame;

// R1FrameMeta with DESI's dependency cards and `extra_cards` more.
FrameMetadata MakeMeta(int extra_cards) {
  FrameMetadata meta = spexd::testing::R1FrameMeta();
  meta.image_header.push_back("DEPNAM00= 'python  '");
  meta.image_header.push_back("DEPVER00= '3.10.14 '");
  for (int i = 0; i < extra_cards; ++i) {
    meta.image_header.push_back("KEY" + std::to_string(i) + std::string(5 - std::to_string(i).size(), ' ') +
                                "= " + std::to_string(i * 17));
  }
  return meta;
}

// "HDU checksum updated <time>": the time of each HDU of `file`, with its byte range.
struct HduRange {
  int64_t begin = 0, end = 0;
  std::string time;
};
std::vector<HduRange> HduRanges(const std::string& file) {
  std::vector<HduRange> out;
  auto f = FitsFile::OpenMemory(file.data(), file.size(), "ref");
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return out;
  const int n = *f->NumHdus();
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(f->MoveToHduIndex(i).ok());
    int status = 0;
    LONGLONG head = 0, data = 0, end = 0;
    char value[FLEN_VALUE] = {0}, comment[FLEN_COMMENT] = {0};
    fits_get_hduaddrll(f->get(), &head, &data, &end, &status);
    fits_read_keyword(f->get(), "CHECKSUM", value, comment, &status);
    EXPECT_EQ(status, 0) << "HDU " << i;
    const std::string c = comment;
    const std::size_t at = c.find("updated ");
    out.push_back({head, end, at == std::string::npos ? "" : c.substr(at + 8, 19)});
  }
  return out;
}

// Index of the first byte that differs (or the shorter length), -1 when equal: a 70 MB
// mismatch must not be printed whole.
int64_t FirstDifference(const std::string& a, const std::string& b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

void ExpectBytesOfReference(const std::string& reference,
                            const std::function<absl::StatusOr<std::string>(const std::string&)>& write) {
  const std::vector<HduRange> hdus = HduRanges(reference);
  ASSERT_FALSE(hdus.empty());
  std::map<std::string, std::string> by_time;  // the new file, once per time the reference has
  for (const HduRange& h : hdus) {
    if (by_time.count(h.time) != 0) continue;
    absl::StatusOr<std::string> file = write(h.time);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_EQ(file->size(), reference.size());
    by_time[h.time] = *std::move(file);
  }
  for (std::size_t i = 0; i < hdus.size(); ++i) {
    const HduRange& h = hdus[i];
    const std::string want = reference.substr(h.begin, h.end - h.begin);
    const std::string got = by_time[h.time].substr(h.begin, h.end - h.begin);
    const int64_t at = FirstDifference(got, want);
    EXPECT_EQ(at, -1) << "HDU " << i << " differs at byte " << at << ": "
                      << got.substr(at / 80 * 80, 80) << " | " << want.substr(at / 80 * 80, 80);
  }
  // Every HDU of the new file verifies (fits_verify_chksum), as the reference's do.
  const std::string& any = by_time.begin()->second;
  auto f = FitsFile::OpenMemory(any.data(), any.size(), "new");
  ASSERT_TRUE(f.ok());
  for (int i = 0; i < static_cast<int>(hdus.size()); ++i) {
    ASSERT_TRUE(f->MoveToHduIndex(i).ok());
    int data_ok = 0, hdu_ok = 0, status = 0;
    fits_verify_chksum(f->get(), &data_ok, &hdu_ok, &status);
    EXPECT_EQ(data_ok, 1) << "HDU " << i;
    EXPECT_EQ(hdu_ok, 1) << "HDU " << i;
  }
}

void ExpectFrameMatches(const Frame& frame, const FrameMetadata& meta,
                        const std::vector<int>& thread_counts, TaskPool* pool = nullptr) {
  absl::StatusOr<std::string> reference = internal::FrameToFitsReference(frame, meta);
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (int threads : thread_counts) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    ExpectBytesOfReference(*reference, [&](const std::string& time) {
      FitsWriteOptions options;
      options.threads = threads;
      options.pool = pool;
      options.checksum_time = time;
      return FrameToFits(frame, meta, options);
    });
  }
}

TEST(FrameWriterBytesTest, FullSizeFrameEqualsReference) {
  const Frame frame = MakeTestFrame(500, 2326, 5, 22, /*specials=*/true);
  FrameMetadata meta = MakeMeta(120);
  meta.fibermap_fits = MakeTestFibermap(510, /*checksum=*/true);
  ExpectFrameMatches(frame, meta, {1, 4});
}

TEST(FrameWriterBytesTest, SmallOddFramesEqualReference) {
  for (bool specials : {false, true}) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(::testing::Message() << "specials " << specials << " variant " << variant);
      const Frame frame = MakeTestFrame(3, 7, 1, 7 + variant, specials);
      FrameMetadata meta = MakeMeta(variant);
      meta.scores = variant != 1;  // --no-scores
      if (variant >= 2) meta.fibermap_fits = MakeTestFibermap(9, /*checksum=*/variant == 3);
      ExpectFrameMatches(frame, meta, {1, 2, 3});
    }
  }
}

// Scores as a float32 stream hands them over (FrameMetadata::given_scores), and a grid out
// of every band (no SCORES HDU).
TEST(FrameWriterBytesTest, GivenAndAbsentScores) {
  Frame frame = MakeTestFrame(4, 5, 2, 3, false);
  FrameMetadata meta = MakeMeta(0);
  meta.given_scores = std::vector<FrameScore>{{"SUM_RAW_COUNT_R", "sum counts", {1, 2, 3, 4}}};
  ExpectFrameMatches(frame, meta, {2});
  for (double& w : frame.wave) w += 10000.0;  // beyond z: no bin in a band
  ExpectFrameMatches(frame, MakeMeta(0), {2});
}

// The FLUX header's size through every position of its last card in a 2880-byte record
// (36 cards), so that the CHECKSUM/DATASUM cards start or spill into a new record.
TEST(FrameWriterBytesTest, HeaderSizesAcrossRecordBoundaries) {
  const Frame frame = MakeTestFrame(2, 3, 1, 11, false);
  for (int extra = 0; extra < 38; ++extra) {
    SCOPED_TRACE(extra);
    ExpectFrameMatches(frame, MakeMeta(extra), {2});
  }
}

// All-zero data units: DATASUM stays '         0' (ffpcks writes it so and leaves it).
TEST(FrameWriterBytesTest, ZeroDataUnits) {
  Frame frame = MakeTestFrame(3, 4, 1, 5, false);
  std::fill(frame.flux.begin(), frame.flux.end(), 0.0);
  std::fill(frame.mask.begin(), frame.mask.end(), 0x80000000u);  // stored as 0
  ExpectFrameMatches(frame, MakeMeta(1), {2});
  Frame empty = MakeTestFrame(0, 4, 1, 5, false);
  ExpectFrameMatches(empty, MakeMeta(1), {2});
}

// The server's shared host pool, as it passes it.
TEST(FrameWriterBytesTest, SharedPool) {
  std::unique_ptr<TaskPool> pool = MakeTaskPool(3);
  const Frame frame = MakeTestFrame(40, 300, 5, 9, true);
  FrameMetadata meta = MakeMeta(10);
  meta.fibermap_fits = MakeTestFibermap(50, true);
  ExpectFrameMatches(frame, meta, {4}, pool.get());
}

TEST(FrameWriterBytesTest, ModelEqualsReference) {
  for (auto [height, width] : {std::pair{5, 7}, std::pair{301, 250}}) {
    Frame frame = MakeTestFrame(2, 3, 1, 13, false);
    frame.model_height = height;
    frame.model_width = width;
    std::mt19937_64 rng(height);
    std::normal_distribution<double> normal(0.0, 50.0);
    for (int i = 0; i < height * width; ++i) frame.model.push_back(normal(rng));
    frame.model[1] = std::nan("");
    const FrameMetadata meta = MakeMeta(3);
    absl::StatusOr<std::string> reference = internal::ModelToFitsReference(frame, meta);
    ASSERT_TRUE(reference.ok()) << reference.status();
    for (int threads : {1, 3}) {
      ExpectBytesOfReference(*reference, [&](const std::string& time) {
        FitsWriteOptions options;
        options.threads = threads;
        options.checksum_time = time;
        return ModelToFits(frame, meta, options);
      });
    }
  }
}

// The model header loses EXTEND after its cards are written: through every position of
// its last card in a record, the header keeps the size CFITSIO gave it.
TEST(FrameWriterBytesTest, ModelHeaderSizesAcrossRecordBoundaries) {
  Frame frame = MakeTestFrame(2, 3, 1, 13, false);
  frame.model_height = 3;
  frame.model_width = 4;
  frame.model.assign(12, 2.5);
  for (int extra = 0; extra < 38; ++extra) {
    SCOPED_TRACE(extra);
    const FrameMetadata meta = MakeMeta(extra);
    absl::StatusOr<std::string> reference = internal::ModelToFitsReference(frame, meta);
    ASSERT_TRUE(reference.ok()) << reference.status();
    ExpectBytesOfReference(*reference, [&](const std::string& time) {
      FitsWriteOptions options;
      options.threads = 2;
      options.checksum_time = time;
      return ModelToFits(frame, meta, options);
    });
  }
}

TEST(FrameWriterBytesTest, MismatchedArraysRefused) {
  Frame frame = MakeTestFrame(3, 4, 1, 1, false);
  frame.rdiags.pop_back();
  auto bytes = FrameToFits(frame, MakeMeta(0));
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  frame = MakeTestFrame(3, 4, 1, 1, false);
  frame.model = {1, 2, 3};
  frame.model_height = 2;
  frame.model_width = 2;
  EXPECT_EQ(ModelToFits(frame, MakeMeta(0)).status().code(), absl::StatusCode::kInvalidArgument);
}

// Chunked sums equal the sequential one, the all-ones (negative zero) case included.
TEST(FitsChecksumTest, ChunkedSumsEqualWhole) {
  std::mt19937_64 rng(4);
  std::string bytes(4 * 1000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  const uint32_t whole = internal::OnesComplementSum(bytes.data(), bytes.size());
  for (std::size_t split : {4u, 400u, 3996u}) {
    const uint32_t a = internal::OnesComplementSum(bytes.data(), split);
    const uint32_t b = internal::OnesComplementSum(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(internal::OnesComplementAdd(a, b), whole);
    EXPECT_EQ(internal::OnesComplementSum(bytes.data() + split, bytes.size() - split, a), whole);
  }
  const std::string ones("\xff\xff\xff\xff\x00\x00\x00\x01\xff\xff\xff\xfe", 12);
  EXPECT_EQ(internal::OnesComplementSum(ones.data(), 12), 0xFFFFFFFFu);
  EXPECT_EQ(internal::OnesComplementSum(std::string(8, '\0').data(), 8), 0u);
  // An exact sum of words, folded, is the ones' complement sum of the same words.
  EXPECT_EQ(internal::FoldWordSum(BigEndianWordSum(bytes.data(), bytes.size())), whole);
  EXPECT_EQ(internal::FoldWordSum(BigEndianWordSum(ones.data(), 12)), 0xFFFFFFFFu);
  EXPECT_EQ(internal::FoldWordSum(0), 0u);
}

}  // namespace
}  // namespace spexd::core
