#include "server/rpc/upload_assembly.h"

#include <chrono>
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

// A client that declares a large upload and sends a byte every few
// seconds (or empty chunks) is held to the floor, however often it sends.
TEST(UploadRateFloorTest, ATrickleFailsOnceAWindowHasPassed) {
  const UploadRateFloor::Clock::time_point t0 = UploadRateFloor::Clock::now();
  const int64_t announced = int64_t{512} << 20;
  UploadRateFloor floor(1000, 1.0, t0);
  // Within the first window nothing is judged: a client may take a moment to start.
  EXPECT_TRUE(floor.Check(1, announced, t0 + std::chrono::milliseconds(500)).ok());
  const absl::Status slow = floor.Check(2, announced, t0 + std::chrono::milliseconds(1200));
  EXPECT_EQ(slow.code(), absl::StatusCode::kDeadlineExceeded) << slow;
  EXPECT_NE(slow.message().find("--upload_min_bytes_per_second"), std::string::npos) << slow;
  // Empty chunks bring nothing: the same count after the window is just as slow.
  UploadRateFloor empty(1000, 1.0, t0);
  EXPECT_EQ(empty.Check(0, announced, t0 + std::chrono::seconds(2)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(UploadRateFloorTest, AFastUploadPassesEachWindowAndTheTailNeedsOnlyWhatIsLeft) {
  const UploadRateFloor::Clock::time_point t0 = UploadRateFloor::Clock::now();
  UploadRateFloor floor(1000, 1.0, t0);
  EXPECT_TRUE(floor.Check(2000, 100000, t0 + std::chrono::milliseconds(1500)).ok());
  // A new span starts at the passed check: 600 bytes in 1.1 s is under the floor.
  EXPECT_TRUE(floor.Check(2500, 100000, t0 + std::chrono::milliseconds(2000)).ok());
  EXPECT_EQ(floor.Check(2600, 100000, t0 + std::chrono::milliseconds(2600)).code(),
            absl::StatusCode::kDeadlineExceeded);
  // When less is left than the floor asks for, sending what is left is enough.
  UploadRateFloor tail(1000, 1.0, t0);
  EXPECT_TRUE(tail.Check(100, 100, t0 + std::chrono::seconds(5)).ok());
  UploadRateFloor short_tail(1000, 1.0, t0);
  EXPECT_EQ(short_tail.Check(50, 100, t0 + std::chrono::seconds(5)).code(),
            absl::StatusCode::kDeadlineExceeded);
  // 0 turns the floor off.
  UploadRateFloor off(0, 1.0, t0);
  EXPECT_TRUE(off.Check(0, 100, t0 + std::chrono::hours(1)).ok());
}

}  // namespace
}  // namespace spexd::server
