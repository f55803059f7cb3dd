// Clients that stall: uploads that stop sending, LoadPsf
// uploads that stop, and a client that never reads its responses. Each must be cut off
// after its (small, test-sized) timeout, hold only the slots counted for it, and never
// lock out other work: before the fix, stalled uploads took every queue slot (realtime
// included) while the metrics reported an empty queue, and a client that did not read
// held a worker until its own deadline.
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/backend/backend.h"
#include "gtest/gtest.h"
#include "server/platform/metrics.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// An extraction upload that sends its header and one small chunk, then nothing.
struct StalledUpload {
  grpc::ClientContext ctx;
  std::unique_ptr<v1::Extraction::Stub> stub;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ExtractRequest, v1::ExtractResponse>> stream;

  StalledUpload(const std::shared_ptr<grpc::Channel>& channel, const std::string& psf_id,
                v1::Priority priority = v1::REPROCESSING) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stub = v1::Extraction::NewStub(channel);
    stream = stub->ExtractFrame(&ctx);
    v1::ExtractRequest req;
    *req.mutable_header() = SmallHeader(psf_id);
    req.mutable_header()->set_upload_size(static_cast<int64_t>(Inputs().frame_bytes.size()));
    req.mutable_header()->set_priority(priority);
    stream->Write(req);
    v1::ExtractRequest chunk;
    chunk.mutable_chunk()->set_data(Inputs().frame_bytes.substr(0, 1000));
    stream->Write(chunk);
  }
  grpc::Status Finish() { return stream->Finish(); }
};

// A LoadPsf upload that sends its header and one chunk, then nothing.
struct StalledPsfUpload {
  grpc::ClientContext ctx;
  std::unique_ptr<v1::Admin::Stub> stub;
  v1::PsfInfo info;
  std::unique_ptr<grpc::ClientWriter<v1::LoadPsfRequest>> writer;

  explicit StalledPsfUpload(const std::shared_ptr<grpc::Channel>& channel) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stub = v1::Admin::NewStub(channel);
    writer = stub->LoadPsf(&ctx, &info);
    v1::LoadPsfRequest req;
    req.mutable_upload()->set_name("stalled");
    req.mutable_upload()->set_size(static_cast<int64_t>(Inputs().psf_bytes.size()));
    writer->Write(req);
    v1::LoadPsfRequest chunk;
    chunk.set_chunk(Inputs().psf_bytes.substr(0, 1000));
    writer->Write(chunk);
  }
  grpc::Status Finish() { return writer->Finish(); }
};

// One raw upload extraction; returns its status and whether the server marked a
// RESOURCE_EXHAUSTED as retryable (trailing metadata).
grpc::Status RawUploadExtract(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& psf_id, v1::Priority priority,
                              bool* retryable) {
  auto stub = v1::Extraction::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->ExtractFrame(&ctx);
  v1::ExtractRequest req;
  *req.mutable_header() = SmallHeader(psf_id);
  req.mutable_header()->set_upload_size(static_cast<int64_t>(Inputs().frame_bytes.size()));
  req.mutable_header()->set_priority(priority);
  bool ok = stream->Write(req);
  v1::ExtractRequest chunk;
  for (std::size_t off = 0; ok && off < Inputs().frame_bytes.size(); off += 1 << 20) {
    chunk.mutable_chunk()->set_data(Inputs().frame_bytes.substr(off, 1 << 20));
    ok = stream->Write(chunk);
  }
  stream->WritesDone();
  v1::ExtractResponse resp;
  while (stream->Read(&resp)) {
  }
  grpc::Status status = stream->Finish();
  const auto& trailers = ctx.GetServerTrailingMetadata();
  *retryable = trailers.find("spexd-retryable") != trailers.end();
  return status;
}

TEST(StalledClientTest, StalledUploadsHoldOnlyUploadSlotsAndAreCutOffWhenIdle) {
  server::ServerOptions o = TestServerOptions();
  o.scheduling.max_queue = 2;
  o.scheduling.max_uploads = 2;
  o.scheduling.realtime_reserve = 1;
  o.limits.upload_idle_seconds = 3;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  client::ClientOptions once;
  once.max_attempts = 1;
  auto c = Connect(*server, once);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  auto channel = Channel(*server);
  std::vector<std::unique_ptr<StalledUpload>> stalled;
  for (int i = 0; i < 2; ++i) stalled.push_back(std::make_unique<StalledUpload>(channel, psf->id()));
  // The numbers are real: two uploads in progress, nothing queued.
  ASSERT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 2; }, 5));
  const auto t0 = Clock::now();
  auto info = c->GetServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->queue_depth(), 0);
  EXPECT_EQ(info->limits().max_uploads(), 2);
  EXPECT_EQ(MetricValue(*server, "spexd_uploads_in_progress"), 2);
  // A third reprocessing upload is refused at once, marked retryable...
  bool retryable = false;
  grpc::Status third = RawUploadExtract(channel, psf->id(), v1::REPROCESSING, &retryable);
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << third.error_message();
  EXPECT_TRUE(retryable);
  // ...a realtime upload still gets the slot kept for it...
  grpc::Status realtime = RawUploadExtract(channel, psf->id(), v1::REALTIME, &retryable);
  EXPECT_TRUE(realtime.ok()) << realtime.error_message();
  // ...and work from server paths is not held up by uploads at all.
  v1::ExtractHeader h = SmallHeader(psf->id());
  h.set_server_path(Inputs().frame_path);
  absl::Status by_path = c->Extract(h, nullptr, false, client::ExtractCallbacks{});
  EXPECT_TRUE(by_path.ok()) << by_path;
  ASSERT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.5)
      << "too slow to check before the idle timeout";
  // The idle uploads are cancelled and their slots freed.
  for (auto& s : stalled) EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 0; }, 5));
  EXPECT_EQ(MetricValue(*server, "spexd_stalled_calls_total{kind=\"upload\"}"), 2);
  EXPECT_EQ(*c->CheckHealth(), "SERVING");
  EXPECT_TRUE(RemoteExtractFrame(*c, SmallHeader(psf->id()), &Inputs().frame_bytes).ok());
}

TEST(StalledClientTest, StalledPsfUploadsShareTheUploadBoundAndAreCutOffWhenIdle) {
  server::ServerOptions o = TestServerOptions();
  o.scheduling.max_uploads = 2;
  o.scheduling.realtime_reserve = 0;
  o.limits.upload_idle_seconds = 2;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  client::ClientOptions once;
  once.max_attempts = 1;
  auto c = Connect(*server, once);
  auto channel = Channel(*server);
  std::vector<std::unique_ptr<StalledPsfUpload>> stalled;
  for (int i = 0; i < 2; ++i) stalled.push_back(std::make_unique<StalledPsfUpload>(channel));
  ASSERT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 2; }, 5));
  // More stalled calls are refused at once instead of each holding a sync thread.
  for (int i = 0; i < 6; ++i) {
    StalledPsfUpload extra(channel);
    EXPECT_EQ(extra.Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // An extraction upload competes for the same slots (a PSF by server path needs none).
  auto psf = c->LoadPsfFromServerPath(Inputs().psf_path);
  ASSERT_TRUE(psf.ok()) << psf.status();
  bool retryable = false;
  grpc::Status refused = RawUploadExtract(channel, psf->id(), v1::REPROCESSING, &retryable);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_TRUE(retryable);
  for (auto& s : stalled) EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 0; }, 5));
  EXPECT_EQ(MetricValue(*server, "spexd_stalled_calls_total{kind=\"upload\"}"), 2);
  EXPECT_TRUE(c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits").ok());
}

// Hands every bundle on `copies` times: a lot of output from a small frame, so that a
// client that never reads fills every buffer between the worker and the socket.
class RepeatingBackend : public core::Backend {
 public:
  RepeatingBackend(std::unique_ptr<core::Backend> inner, int copies)
      : inner_(std::move(inner)), copies_(copies) {}
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    return inner_->Extract(job, [&](core::BundleResult&& b) -> absl::Status {
      for (int i = 1; i < copies_; ++i) {
        core::BundleResult copy = b;
        if (absl::Status s = sink(std::move(copy)); !s.ok()) return s;
      }
      return sink(std::move(b));
    });
  }

 private:
  std::unique_ptr<core::Backend> inner_;
  int copies_;
};

TEST(StalledClientTest, AClientThatNeverReadsLosesItsWorkerAfterTheWriteTimeout) {
  server::ServerOptions o = TestServerOptions();
  o.limits.write_timeout_seconds = 1;
  o.workers.backend_factory = [](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    *reason = "test: repeating cpu";
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<RepeatingBackend>(*std::move(inner), 500));
    return out;
  };
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  auto stub = v1::Extraction::NewStub(Channel(*server));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->ExtractFrame(&ctx);
  v1::ExtractRequest req;
  *req.mutable_header() = SmallHeader(psf->id());
  req.mutable_header()->set_server_path(Inputs().frame_path);
  stream->Write(req);
  stream->WritesDone();
  auto busy = [&] {
    auto info = c->GetServerInfo();
    return info.ok() && info->workers(0).busy();
  };
  ASSERT_TRUE(WaitFor(busy, 10));
  // Never read: the worker must be freed a little after the 1 s write timeout, long
  // before the call's own 60 s deadline.
  EXPECT_TRUE(WaitFor([&] { return !busy(); }, 8)) << "the worker is still held";
  EXPECT_TRUE(WaitFor(
      [&] { return MetricValue(*server, "spexd_stalled_calls_total{kind=\"write\"}") == 1; }, 5));
  // (The client's own view waits for its unread messages: it gives up here.)
  ctx.TryCancel();
  stream->Finish();
  EXPECT_EQ(*c->CheckHealth(), "SERVING");
}

// An exposure whose client never reads its stream, as for a single frame above: before
// the fix the call had no cut-off; its frames ran on, their results piled up behind the
// blocked write, and the call ended only at the client's deadline (or never). An
// exposure's messages are small, so first many frames refused at once with long paths
// fill the transport's buffers; then frames on a slow backend run while the write waits.
TEST(StalledClientTest, AnExposureClientThatNeverReadsIsCutOffAndItsFramesCancelled) {
  server::ServerOptions o = TestServerOptions();
  o.limits.write_timeout_seconds = 1;
  o.workers.backend_factory = [](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    *reason = "test: slow cpu";
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<SlowBackend>(*std::move(inner), 0.3));  // 0.6 s a frame
    return out;
  };
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  v1::ExposureRequest request;
  std::string deep;  // 18 components of 200 bytes: each result carries two such paths
  for (int i = 0; i < 18; ++i) absl::StrAppend(&deep, "/", std::string(200, 'd'));
  for (int i = 0; i < 300; ++i) {
    v1::ExtractHeader h = SmallHeader(std::string(64, 'f'));  // no such PSF: refused at once
    h.set_server_path(Inputs().data_dir + deep + ".fits");
    h.set_server_output_path(absl::StrCat(Inputs().output_dir, deep, "/", i, ".fits"));
    *request.add_frames() = h;
  }
  constexpr int kFrames = 10;
  for (int i = 0; i < kFrames; ++i) {
    v1::ExtractHeader h = SmallHeader(psf->id());
    h.set_server_path(Inputs().frame_path);
    const std::string out = absl::StrCat(Inputs().output_dir, "/stalled-exposure-", i, ".fits");
    std::remove(out.c_str());
    h.set_server_output_path(out);
    *request.add_frames() = h;
  }
  // No BDP probing: the client's window must not grow for a stream nobody reads.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server->port()),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Extraction::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  const auto t0 = Clock::now();
  auto reader = stub->ExtractExposure(&ctx, request);
  auto busy = [&] {
    auto info = c->GetServerInfo();
    return info.ok() && info->workers(0).busy();
  };
  ASSERT_TRUE(WaitFor(busy, 10));
  // Never read: cut off a little after the 1 s write timeout, as a single frame is...
  EXPECT_TRUE(WaitFor(
      [&] { return MetricValue(*server, "spexd_stalled_calls_total{kind=\"write\"}") == 1; }, 8));
  // ...its frames not finished are cancelled, not run to the end (10 x 0.6 s), the call
  // ends server-side and the worker is free, long before the call's own 60 s deadline.
  EXPECT_TRUE(WaitFor(
      [&] {
        return MetricValue(*server, "spexd_exposure_frames_total{code=\"CANCELLED\"}") >= kFrames / 2;
      },
      5))
      << MetricValue(*server, "spexd_exposure_frames_total{code=\"CANCELLED\"}");
  EXPECT_TRUE(WaitFor([&] { return MetricValue(*server, "spexd_inflight_requests") == 0; }, 5));
  EXPECT_TRUE(WaitFor([&] { return !busy(); }, 5)) << "the worker is still held";
  EXPECT_TRUE(WaitFor([&] { return c->GetServerInfo()->queue_depth() == 0; }, 5));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  EXPECT_EQ(MetricValue(*server, "spexd_requests_total{code=\"CANCELLED\",rpc=\"ExtractExposure\"}"), 1);
  // Reading at last, the client gets what was sent before the cut-off, then CANCELLED.
  v1::ExposureResponse response;
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server serves on.
  EXPECT_EQ(*c->CheckHealth(), "SERVING");
  v1::ExtractHeader h = SmallHeader(psf->id());
  h.set_server_path(Inputs().frame_path);
  EXPECT_TRUE(c->Extract(h, nullptr, false, client::ExtractCallbacks{}).ok());
}

}  // namespace
}  // namespace spexd::testing
