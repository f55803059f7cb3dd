// The write side of the Extraction service's calls (server/rpc/response_queue.h): one
// write at a time, in order; the end after the last queued response, or at once when the
// client is gone; the first end's status, unless replaced before it is reached.
#include "server/rpc/response_queue.h"

#include <string>

#include "gtest/gtest.h"

namespace spexd::server {
namespace {

using Queue = ResponseQueue<std::string>;

TEST(ResponseQueueTest, WritesOneAtATimeInOrderThenEnds) {
  Queue q;
  absl::MutexLock lock(&q.mu);
  Queue::Step first = q.Push("a");
  ASSERT_NE(first.write, nullptr);
  EXPECT_EQ(*first.write, "a");
  EXPECT_EQ(q.Push("b").write, nullptr);  // "a" is in flight
  EXPECT_EQ(q.Push("c").write, nullptr);
  Queue::Clock::time_point since;
  EXPECT_TRUE(q.WaitingOnWrite(&since));
  // The end waits for the queued responses.
  EXPECT_FALSE(q.End(absl::OkStatus()).end);
  EXPECT_TRUE(q.end_requested());
  Queue::Step next = q.WriteDone(true);
  ASSERT_NE(next.write, nullptr);
  EXPECT_EQ(*next.write, "b");
  next = q.WriteDone(true);
  ASSERT_NE(next.write, nullptr);
  EXPECT_EQ(*next.write, "c");
  Queue::Step end = q.WriteDone(true);
  EXPECT_EQ(end.write, nullptr);
  EXPECT_TRUE(end.end);
  EXPECT_TRUE(end.status.ok());
  EXPECT_FALSE(q.WaitingOnWrite(&since));
  // Ended: nothing more is queued, and a second end is ignored.
  EXPECT_EQ(q.Push("d").write, nullptr);
  EXPECT_FALSE(q.End(absl::CancelledError("late")).end);
}

TEST(ResponseQueueTest, EndsAtOnceWithNothingInFlight) {
  Queue q;
  absl::MutexLock lock(&q.mu);
  Queue::Step end = q.End(absl::NotFoundError("no psf"));
  EXPECT_TRUE(end.end);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kNotFound);
}

TEST(ResponseQueueTest, AFailedWriteDropsTheQueueAndEndsAtTheEnd) {
  Queue q;
  absl::MutexLock lock(&q.mu);
  ASSERT_NE(q.Push("a").write, nullptr);
  q.Push("b");
  Queue::Step after = q.WriteDone(false);  // the client is gone
  EXPECT_EQ(after.write, nullptr);
  EXPECT_FALSE(after.end);  // no end requested yet
  EXPECT_TRUE(q.broken());
  EXPECT_EQ(q.queued(), 0u);
  EXPECT_EQ(q.Push("c").write, nullptr);  // dropped
  Queue::Clock::time_point since;
  EXPECT_FALSE(q.WaitingOnWrite(&since));
  Queue::Step end = q.End(absl::CancelledError("client gone"));
  EXPECT_TRUE(end.end);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kCancelled);
}

TEST(ResponseQueueTest, AnEndNotYetReachedTakesTheReplacedStatus) {
  Queue q;
  absl::MutexLock lock(&q.mu);
  ASSERT_NE(q.Push("a").write, nullptr);
  q.End(absl::OkStatus());
  q.ReplaceEndStatus(absl::InvalidArgumentError("a message after the request"));
  Queue::Step end = q.WriteDone(true);
  ASSERT_TRUE(end.end);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kInvalidArgument);
  // Once reached, the end's status stays.
  q.ReplaceEndStatus(absl::InternalError("too late"));
  EXPECT_FALSE(q.End(absl::InternalError("again")).end);
}

TEST(ResponseQueueTest, EndNowEndsBeforeAnyResponse) {
  Queue q;
  absl::MutexLock lock(&q.mu);
  q.EndNow(absl::UnavailableError("draining"));
  EXPECT_TRUE(q.end_requested());
  EXPECT_EQ(q.Push("a").write, nullptr);
  EXPECT_FALSE(q.End(absl::OkStatus()).end);
}

}  // namespace
}  // namespace spexd::server
