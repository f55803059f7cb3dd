#include "cuda/host/frames_in_flight.h"

#include <optional>

#include "gtest/gtest.h"

namespace spexd::cuda {
namespace {

// The lone-frame latency mode must see a second frame on the same GPU and only there.
TEST(FramesInFlightTest, AFrameIsAloneOnlyWithoutAnotherOnItsDevice) {
  ASSERT_EQ(FramesInFlight(7), 0);
  std::optional<FrameInFlight> first(7);
  EXPECT_TRUE(first->alone());
  {
    const FrameInFlight second(7);
    EXPECT_FALSE(second.alone());
    const FrameInFlight other_device(8);
    EXPECT_TRUE(other_device.alone());
    EXPECT_EQ(FramesInFlight(7), 2);
  }
  EXPECT_EQ(FramesInFlight(7), 1);
  first.reset();
  EXPECT_EQ(FramesInFlight(7), 0);
  EXPECT_EQ(FramesInFlight(8), 0);
  const FrameInFlight again(7);
  EXPECT_TRUE(again.alone());  // the count went back to zero
}

// A lone frame runs its whole critical chain at the greatest priority, the tail stream
// (eigen stages, decorrelation, model) included; frames that share the GPU none of it.
TEST(FramesInFlightTest, ALoneFrameRunsComputePrepAndTailAtTheGreatestPriority) {
  const StreamPriorities lone = FramePriorities(/*alone=*/true);
  EXPECT_TRUE(lone.compute);
  EXPECT_TRUE(lone.prep);
  EXPECT_TRUE(lone.tail);
  const StreamPriorities shared = FramePriorities(/*alone=*/false);
  EXPECT_FALSE(shared.compute);
  EXPECT_FALSE(shared.prep);
  EXPECT_FALSE(shared.tail);
}

}  // namespace
}  // namespace spexd::cuda
