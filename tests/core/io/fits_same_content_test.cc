// core::StoredFitsComparer: a frame written again (another checksum date) is the same
// file, plain or gzip-compressed, fed in any pieces; any other difference is found.
#include "core/io/fits_same_content.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/frame/frame_writer.h"
#include "gtest/gtest.h"
#include "tests/frame_fixtures.h"

namespace spexd::core {
namespace {

std::string FrameFile(const std::string& time) {
  const Frame frame = testing::MakeTestFrame(6, 40, 2, 7, /*specials=*/false);
  FrameMetadata meta;
  meta.in_psf = "psf.fits";
  meta.in_img = "preproc.fits";
  meta.wmin = 5760.0;
  meta.wmax = 5760.0 + 0.8 * 39;
  meta.dw = 0.8;
  meta.image_header = {"CAMERA  = 'r1      '           / Spectrograph Camera"};
  meta.fibermap_fits = testing::MakeTestFibermap(20, /*checksum=*/true);
  FitsWriteOptions options;
  options.threads = 1;
  options.checksum_time = time;
  auto fits = FrameToFits(frame, meta, options);
  EXPECT_TRUE(fits.ok()) << fits.status();
  return fits.value_or("");
}

// `bytes` in pieces of the given sizes (cycled), as the progressive file holds them.
std::vector<absl::string_view> Split(const std::string& bytes, std::vector<std::size_t> sizes) {
  std::vector<absl::string_view> out;
  for (std::size_t at = 0, i = 0; at < bytes.size(); ++i) {
    const std::size_t n = std::min(sizes[i % sizes.size()], bytes.size() - at);
    out.emplace_back(bytes.data() + at, n);
    at += n;
  }
  return out;
}

// Whether `stored` matches `expected` (in pieces), fed in pieces of `feed` bytes.
bool Matches(const std::vector<absl::string_view>& expected, bool gzip, const std::string& stored,
             std::size_t feed = 4096, std::string* why = nullptr) {
  auto c = StoredFitsComparer::Create(expected, gzip, "out.fits");
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return false;
  bool same = (*c)->SizeCanMatch(static_cast<int64_t>(stored.size()));
  for (std::size_t at = 0; same && at < stored.size(); at += feed) {
    same = (*c)->Feed(absl::string_view(stored).substr(at, feed));
  }
  same = same && (*c)->Finish();
  if (why != nullptr) *why = (*c)->difference();
  return same;
}

class StoredFitsComparerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    first_ = FrameFile("2026-11-23T14:00:00");
    again_ = FrameFile("2026-11-23T14:00:07");
    ASSERT_FALSE(first_.empty());
    ASSERT_EQ(first_.size(), again_.size());
    ASSERT_NE(first_, again_);  // the checksum dates
  }
  std::string first_, again_;
};

TEST_F(StoredFitsComparerTest, TheSameFrameWrittenLaterMatchesInAnyPieces) {
  EXPECT_TRUE(Matches({again_}, false, first_));
  // Pieces that cut cards (and CHECKSUM cards) anywhere, fed a byte at a time too.
  const auto pieces = Split(again_, {1, 79, 2881, 13, 5000});
  for (std::size_t feed : {std::size_t{1}, std::size_t{80}, std::size_t{997}, first_.size()}) {
    SCOPED_TRACE(feed);
    EXPECT_TRUE(Matches(pieces, false, first_, feed));
  }
}

TEST_F(StoredFitsComparerTest, AGzipFileIsComparedInflated) {
  auto gz_first = FitsBytesForPath("f.fits.gz", first_);
  auto gz_again = FitsBytesForPath("f.fits.gz", again_);
  ASSERT_TRUE(gz_first.ok() && gz_again.ok());
  EXPECT_NE(*gz_first, *gz_again);
  EXPECT_TRUE(Matches({again_}, true, *gz_first, 333));
  std::string why;
  EXPECT_FALSE(Matches({again_}, true, first_, 4096, &why));  // plain bytes under .gz
  EXPECT_NE(why.find("gzip"), std::string::npos) << why;
  EXPECT_FALSE(Matches({again_}, true, gz_first->substr(0, gz_first->size() - 9), 4096, &why));
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;
  std::string corrupt = *gz_first;
  corrupt[corrupt.size() / 2] ^= 0x40;
  EXPECT_FALSE(Matches({again_}, true, corrupt));
  // A stream that inflates far past the frame stops at its length (a bomb).
  auto bomb = FitsBytesForPath("b.gz", first_ + std::string(first_.size() * 20, '\0'));
  ASSERT_TRUE(bomb.ok());
  EXPECT_FALSE(Matches({again_}, true, *bomb, 4096, &why));
  EXPECT_NE(why.find("longer"), std::string::npos) << why;
}

TEST_F(StoredFitsComparerTest, EveryOtherDifferenceIsFound) {
  std::string why;
  std::string data_byte = first_;
  data_byte[data_byte.size() - 3000] ^= 0x01;
  EXPECT_FALSE(Matches({again_}, false, data_byte, 4096, &why));
  EXPECT_NE(why.find("differs at byte"), std::string::npos) << why;
  EXPECT_FALSE(Matches({again_}, false, first_.substr(0, first_.size() - 2880), 4096, &why));
  EXPECT_FALSE(Matches({again_}, false, first_ + std::string(2880, ' ')));
  EXPECT_FALSE(Matches({again_}, false, "SIMPLE  =                    T"));
  EXPECT_FALSE(Matches({again_}, false, ""));
  // Fed past the size check (a file that grows while read): still found.
  auto c = StoredFitsComparer::Create({again_}, false, "out.fits");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->Feed(first_));
  EXPECT_FALSE((*c)->Feed("x"));
  EXPECT_FALSE((*c)->Finish());
}

TEST_F(StoredFitsComparerTest, OnlyTheChecksumDatesAreSkipped) {
  const std::size_t checksum = first_.find("CHECKSUM= '");
  const std::size_t datasum = first_.find("DATASUM = '");
  ASSERT_NE(checksum, std::string::npos);
  ASSERT_NE(datasum, std::string::npos);
  std::string value = first_;  // CHECKSUM's value covers the dates: skipped
  value[checksum + 12] = value[checksum + 12] == 'A' ? 'B' : 'A';
  EXPECT_TRUE(Matches({again_}, false, value));
  std::string keyword = first_;
  keyword[checksum + 7] = 'X';
  EXPECT_FALSE(Matches({again_}, false, keyword));
  std::string sum = first_;  // DATASUM's value is the data's: compared
  sum[datasum + 19] = sum[datasum + 19] == '1' ? '2' : '1';
  EXPECT_FALSE(Matches({again_}, false, sum));
  std::string other_card = first_;
  other_card[first_.find("WAVEMIN =") + 30] ^= 0x01;
  EXPECT_FALSE(Matches({again_}, false, other_card));
}

// Data bytes that spell a CHECKSUM card at a card boundary are data: compared.
TEST(StoredFitsComparer, CardLikeDataIsCompared) {
  auto card = [](const std::string& text) { return absl::StrFormat("%-80s", text); };
  std::string header = card("SIMPLE  =                    T") + card("BITPIX  =                    8") +
                       card("NAXIS   =                    1") + card("NAXIS1  =                  160") +
                       card("END");
  header.resize(2880, ' ');
  std::string data = card("CHECKSUM= 'AAAA'") + card("DATASUM = '1'  / x");
  data.resize(2880, '\0');
  const std::string file = header + data;
  std::string other = file;
  other[2880 + 12] = 'B';
  EXPECT_TRUE(Matches({file}, false, file));
  EXPECT_FALSE(Matches({file}, false, other));
  other = file;
  other[2880 + 80 + 17] = 'y';  // a "comment" inside the data
  EXPECT_FALSE(Matches({file}, false, other));
}

TEST(StoredFitsComparer, ExpectedBytesThatAreNotFitsAreRefused) {
  EXPECT_EQ(StoredFitsComparer::Create({"not FITS at all"}, false, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string no_end(2880, ' ');
  no_end.replace(0, 30, "SIMPLE  =                    T");
  EXPECT_EQ(StoredFitsComparer::Create({no_end}, false, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoredFitsComparer, SizeCheckBeforeAnyRead) {
  std::string header(2880, ' ');
  header.replace(0, 80, absl::StrFormat("%-80s", "SIMPLE  =                    T"));
  header.replace(80, 80, absl::StrFormat("%-80s", "BITPIX  =                    8"));
  header.replace(160, 80, absl::StrFormat("%-80s", "NAXIS   =                    0"));
  header.replace(240, 80, absl::StrFormat("%-80s", "END"));
  auto plain = StoredFitsComparer::Create({header}, false, "x");
  auto gz = StoredFitsComparer::Create({header}, true, "x");
  ASSERT_TRUE(plain.ok() && gz.ok());
  EXPECT_TRUE((*plain)->SizeCanMatch(2880));
  EXPECT_FALSE((*plain)->SizeCanMatch(2879));
  EXPECT_FALSE((*plain)->SizeCanMatch(5760));
  EXPECT_TRUE((*gz)->SizeCanMatch(100));
  EXPECT_FALSE((*gz)->SizeCanMatch(10));
  EXPECT_FALSE((*gz)->SizeCanMatch(int64_t{1} << 30));
}

}  // namespace
}  // namespace spexd::core
