#include "server/upload_assembly.h"

#include <string>

#include "gtest/gtest.h"

namespace spexd::server {
namespace {

TEST(UploadAssemblyTest, TakesChunksUpToTheAnnouncedSizeAndNoFurther) {
  UploadAssembly upload(10, UploadAssembly::kImageReserve);
  EXPECT_FALSE(upload.complete());
  EXPECT_TRUE(upload.Append("abcd"));
  EXPECT_TRUE(upload.Append(""));
  EXPECT_FALSE(upload.Append("efghijk"));  // 4 + 7 > 10: refused whole
  EXPECT_EQ(upload.received(), 4);
  EXPECT_TRUE(upload.Append("efghij"));
  EXPECT_TRUE(upload.complete());
  EXPECT_FALSE(upload.Append("x"));
  EXPECT_EQ(upload.Take(), "abcdefghij");
  EXPECT_EQ(upload.received(), 0);
}

TEST(UploadAssemblyTest, AHugeAnnouncementReservesNothingUnlessAsked) {
  UploadAssembly psf(int64_t{1} << 40);
  EXPECT_TRUE(psf.Append("x"));
  EXPECT_EQ(psf.announced(), int64_t{1} << 40);
  EXPECT_FALSE(psf.complete());
}

}  // namespace
}  // namespace spexd::server
