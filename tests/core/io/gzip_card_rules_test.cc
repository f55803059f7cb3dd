// A .fits.gz is read with the card rules of its plain twin (core/io/internal/fits_header.h):
// odd structural cards (NAXIS01 beside NAXIS1; a second NAXIS1, NAXIS2 or BITPIX, where
// the first card of a name counts, as in CFITSIO) give the same verdict, plain or gzip,
// uploaded or by path; so do a header without END and a malformed value indicator.
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/fits_file.h"
#include "core/io/preproc.h"
#include "gtest/gtest.h"
#include "tests/core/io/gzip_test_bytes.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

// A small preproc: IMAGE (the primary) and IVAR float32 [5][6], MASK int16.
std::string TwinPreproc() {
  auto f = FitsFile::CreateMemory("twin");
  EXPECT_TRUE(f.ok()) << f.status();
  std::vector<float> image(30), ivar(30, 4.0f);
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>(i) * 0.25f;
  std::vector<int16_t> mask(30, 0);
  EXPECT_TRUE(f->WriteImage<float>("IMAGE", {6, 5}, image.data()).ok());
  EXPECT_TRUE(f->WriteImage<float>("IVAR", {6, 5}, ivar.data()).ok());
  EXPECT_TRUE(f->WriteImage<int16_t>("MASK", {6, 5}, mask.data()).ok());
  auto bytes = f->TakeMemory();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

std::string Card80(const std::string& text) { return text + std::string(80 - text.size(), ' '); }

// `fits` with `cards` inserted before the first header's END card (the header growing by
// a record where it must).
std::string WithCards(const std::string& fits, const std::vector<std::string>& cards) {
  std::size_t end = 0;
  while (fits.compare(end, 8, "END     ") != 0) end += 80;
  const std::size_t data = (end / 2880 + 1) * 2880;
  std::string header = fits.substr(0, end);
  for (const std::string& c : cards) header += Card80(c);
  header += Card80("END");
  header.resize((header.size() + 2879) / 2880 * 2880, ' ');
  return header + fits.substr(data);
}

// The verdicts on `plain` and its gzip twin, uploaded and by path: all alike.
void ExpectTwinsAlike(const std::string& plain, bool served) {
  const std::string gz = gzip_test::Gzip(plain);
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(testing::WriteBytes(dir + "/twin.fits", plain));
  ASSERT_TRUE(testing::WriteBytes(dir + "/twin.fits.gz", gz));
  const absl::StatusOr<PreprocImage> reads[] = {
      ReadPreprocFromMemory(plain.data(), plain.size(), "twin", {}),
      ReadPreprocFromMemory(gz.data(), gz.size(), "twin", {}),
      ReadPreproc(dir + "/twin.fits", {}),
      ReadPreproc(dir + "/twin.fits.gz", {})};
  for (const auto& r : reads) {
    EXPECT_EQ(r.ok(), served) << r.status();
    EXPECT_EQ(r.status().code(), reads[0].status().code()) << r.status() << " vs " << reads[0].status();
    // The gzip path words no refusal of its own about the cards.
    EXPECT_EQ(r.status().message().find("gzip"), std::string::npos) << r.status();
    if (r.ok() && reads[0].ok()) {
      EXPECT_EQ(r->image, reads[0]->image);
      EXPECT_EQ(r->ivar, reads[0]->ivar);
    }
  }
}

TEST(GzipCardRules, TheTwinsAreReadAlike) {
  const std::string fits = TwinPreproc();
  ExpectTwinsAlike(fits, true);
}

TEST(GzipCardRules, OnlyTheExactNameIsAnAxis) {
  ExpectTwinsAlike(WithCards(TwinPreproc(), {"NAXIS01 =                  999"}), true);
  ExpectTwinsAlike(WithCards(TwinPreproc(), {"NAXIS002=                    7"}), true);
}

TEST(GzipCardRules, TheFirstCardOfANameCounts) {
  ExpectTwinsAlike(WithCards(TwinPreproc(), {"NAXIS2  =                  999"}), true);
  ExpectTwinsAlike(WithCards(TwinPreproc(), {"NAXIS1  =                    1"}), true);
  ExpectTwinsAlike(WithCards(TwinPreproc(), {"BITPIX  =                  -64"}), true);
}

TEST(GzipCardRules, MalformedCardsAreRefusedAlike) {
  // A value indicator outside columns 9-10 on a structural name.
  ExpectTwinsAlike(WithCards(TwinPreproc(), {"EXTNAME  = 'OTHER'"}), false);
  // A byte that is not printable ASCII in a header.
  std::string bad = TwinPreproc();
  bad[80 * 3 + 40] = '\x01';
  ExpectTwinsAlike(bad, false);
}

}  // namespace
}  // namespace spexd::core
