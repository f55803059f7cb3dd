// Hostile-client probes (docs/reliability.md §5b), each with its exact input,
// and the server still serving a good request afterwards:
// - ProbeOrderTest (not timing-bound): a path outside the data roots answers the same
//   whether or not the file exists; an output path is refused when the header arrives,
//   not after the upload; a bad request gets the same answer whether or not its PSF is
//   loaded.
// - SlowUploadTest (timing-bound, left out of the TSan stage): a trickle of bytes or of
//   empty chunks does not hold an upload slot, and a drain refuses uploads at once.
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/backend/backend.h"
#include "gtest/gtest.h"
#include "server/platform/content_id.h"
#include "server/platform/metrics.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kHugeUpload = int64_t{512} << 20;  // what the probe announced

client::ClientOptions Once() {
  client::ClientOptions o;
  o.max_attempts = 1;
  return o;
}

// Sends `header` (and nothing else, not even the half-close) and waits for the server's
// answer, at most `seconds`: the status, and how long it took.
grpc::Status HeaderOnly(const std::shared_ptr<grpc::Channel>& channel, const v1::ExtractHeader& header,
                        double seconds, double* took) {
  const auto t0 = Clock::now();
  auto stub = v1::Extraction::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
  auto stream = stub->ExtractFrame(&ctx);
  v1::ExtractRequest m;
  *m.mutable_header() = header;
  stream->Write(m);
  v1::ExtractResponse resp;
  while (stream->Read(&resp)) {
  }
  grpc::Status status = stream->Finish();
  *took = SecondsSince(t0);
  return status;
}

// Checks that the server still extracts a frame, uploaded and by path.
void ExpectStillServing(server::SpexdServer& server, const std::string& psf_id) {
  auto c = Connect(server, Once());
  auto health = c->CheckHealth();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
  EXPECT_TRUE(RemoteExtractFrame(*c, SmallHeader(psf_id), &Inputs().frame_bytes).ok());
  v1::ExtractHeader by_path = SmallHeader(psf_id);
  by_path.set_server_path(Inputs().frame_path);
  EXPECT_TRUE(RemoteExtractFrame(*c, by_path, nullptr).ok());
}

// /etc/passwd answered PERMISSION_DENIED, /etc/nonexistent NOT_FOUND, so a
// client could list files (and, through /proc, the host's processes) outside the roots.
TEST(ProbeOrderTest, APathOutsideTheDataRootsGetsTheSameAnswerWhetherOrNotItExists) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server, Once());
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  const std::string sibling = Inputs().data_dir + "-sibling/frame.fits";  // no such dir
  for (const std::string& path : {std::string("/etc/passwd"), std::string("/etc/nonexistent"),
                                  std::string("/proc/1/environ"), std::string("/proc/999999/environ"),
                                  sibling}) {
    SCOPED_TRACE(path);
    v1::ExtractHeader h = SmallHeader(psf->id());
    h.set_server_path(path);
    const absl::Status extract = c->Extract(h, nullptr, false, client::ExtractCallbacks{});
    EXPECT_EQ(extract.code(), absl::StatusCode::kPermissionDenied) << extract;
    const auto loaded = c->LoadPsfFromServerPath(path);
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied) << loaded.status();
  }
  // Inside the roots a missing file is still NOT_FOUND.
  EXPECT_EQ(c->LoadPsfFromServerPath(Inputs().data_dir + "/nonexistent.fits").status().code(),
            absl::StatusCode::kNotFound);
  ExpectStillServing(*server, psf->id());
}

// The output path was checked only after the whole frame had been uploaded (or
// decoded), against docs/service.md. The probe announced 512 MiB and sent no data: the
// answer must come at once, not after an upload that never comes.
TEST(ProbeOrderTest, AnOutputPathIsRefusedWhenItsHeaderArrives) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server, Once());
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  struct Probe {
    std::string output;
    grpc::StatusCode expected;
  };
  // (An existing output file is not among them: it is compared with the frame once
  // extracted, so that a retry gets the same answer; idempotent_output_test.cc.)
  const std::vector<Probe> probes = {
      {Inputs().output_dir + std::string("/a\0b.fits", 9), grpc::StatusCode::INVALID_ARGUMENT},
      {"/etc/spexd-out.fits", grpc::StatusCode::PERMISSION_DENIED},
      {"/nonexistent-dir/out.fits", grpc::StatusCode::PERMISSION_DENIED},
      {Inputs().output_dir + "/no-such-dir/out.fits", grpc::StatusCode::INVALID_ARGUMENT},
  };
  auto channel = Channel(*server);
  for (const Probe& p : probes) {
    SCOPED_TRACE(p.output);
    v1::ExtractHeader h = SmallHeader(psf->id());
    h.set_upload_size(kHugeUpload);
    h.set_server_output_path(p.output);
    double took = 0;
    const grpc::Status status = HeaderOnly(channel, h, 5, &took);
    EXPECT_EQ(status.error_code(), p.expected) << status.error_message();
    EXPECT_LT(took, 2.0);
    // By server path too: refused before the frame is decoded.
    h.set_server_path(Inputs().frame_path);
    EXPECT_EQ(HeaderOnly(channel, h, 5, &took).error_code(), p.expected);
  }
  ExpectStillServing(*server, psf->id());
}

// An unknown psf_id with nspec=7 got NOT_FOUND, the same request after the PSF
// was loaded INVALID_ARGUMENT. What needs no PSF is now checked first.
TEST(ProbeOrderTest, ABadRequestGetsTheSameAnswerWhetherOrNotItsPsfIsLoaded) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server, Once());
  const std::string id = server::Sha256Hex(Inputs().psf_bytes);  // the id LoadPsf gives
  auto channel = Channel(*server);
  struct Probe {
    const char* name;
    std::function<void(v1::ExtractHeader*)> edit;
    absl::StatusCode expected;
  };
  // (An existing output file is not among them: it is compared with the frame once
  // extracted, so that a retry gets the same answer; idempotent_output_test.cc.)
  const std::vector<Probe> probes = {
      {"nspec=7", [](v1::ExtractHeader* h) { h->mutable_params()->set_nspec(7); },
       absl::StatusCode::kInvalidArgument},
      {"specmin=3", [](v1::ExtractHeader* h) { h->mutable_params()->set_specmin(3); },
       absl::StatusCode::kInvalidArgument},
      {"bundlesize=7", [](v1::ExtractHeader* h) { h->mutable_params()->set_bundlesize(7); },
       absl::StatusCode::kInvalidArgument},
      {"regularize=-1", [](v1::ExtractHeader* h) { h->mutable_params()->set_regularize(-1); },
       absl::StatusCode::kInvalidArgument},
      {"upload_size=-1", [](v1::ExtractHeader* h) { h->set_upload_size(-1); },
       absl::StatusCode::kInvalidArgument},
      {"no image", [](v1::ExtractHeader* h) { h->clear_server_path(); },
       absl::StatusCode::kInvalidArgument},
      {"upload over the limit", [](v1::ExtractHeader* h) { h->set_upload_size(int64_t{1} << 40); },
       absl::StatusCode::kResourceExhausted},
      {"output NUL", [](v1::ExtractHeader* h) {
         h->set_server_output_path(Inputs().output_dir + std::string("/x\0y", 4));
       }, absl::StatusCode::kInvalidArgument},
  };
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "PSF not loaded" : "PSF loaded");
    if (round == 1) {
      auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
      ASSERT_TRUE(psf.ok()) << psf.status();
      ASSERT_EQ(psf->id(), id);
    }
    for (const Probe& p : probes) {
      SCOPED_TRACE(p.name);
      v1::ExtractHeader h = SmallHeader(id);
      h.set_server_path(Inputs().frame_path);
      p.edit(&h);
      // A raw stream: the client library refuses some of these before sending them.
      double took = 0;
      const grpc::Status status = HeaderOnly(channel, h, 10, &took);
      EXPECT_EQ(static_cast<int>(status.error_code()), static_cast<int>(p.expected))
          << status.error_message();
    }
    // A good request with the PSF not loaded is still NOT_FOUND (load it first).
    if (round == 0) {
      v1::ExtractHeader h = SmallHeader(id);
      h.set_server_path(Inputs().frame_path);
      EXPECT_EQ(c->Extract(h, nullptr, false, client::ExtractCallbacks{}).code(),
                absl::StatusCode::kNotFound);
    }
  }
  ExpectStillServing(*server, id);
}

// A client that announces a large upload, then sends `piece` every `period` seconds (an
// empty piece: empty chunks) on its own thread until the server ends the call; with
// `period` <= 0 it sends `piece` once and waits for the answer. After `give_up` seconds
// it stops (cancel or deadline), so that a regression fails on time instead of hanging.
class Trickle {
 public:
  Trickle(const std::shared_ptr<grpc::Channel>& channel, const std::string& psf_id, bool psf_upload,
          std::string piece, double period, double give_up)
      : thread_([=, this] {
          const auto t0 = Clock::now();
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(static_cast<int>(give_up * 1000) + 1000));
          // True while the client should keep sending.
          auto again = [&] {
            if (period <= 0) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(period * 1000)));
            return SecondsSince(t0) < give_up;
          };
          bool gave_up = false;
          if (psf_upload) {
            auto stub = v1::Admin::NewStub(channel);
            v1::PsfInfo info;
            auto writer = stub->LoadPsf(&ctx, &info);
            v1::LoadPsfRequest m;
            m.mutable_upload()->set_name("trickle");
            m.mutable_upload()->set_size(kHugeUpload);
            bool ok = writer->Write(m);
            m.set_chunk(piece);
            ok = ok && writer->Write(m);
            while (ok && again()) ok = writer->Write(m);
            gave_up = ok && period > 0;
            if (gave_up) ctx.TryCancel();
            status_ = writer->Finish();  // without WritesDone: waits for the server
          } else {
            auto stub = v1::Extraction::NewStub(channel);
            auto stream = stub->ExtractFrame(&ctx);
            v1::ExtractRequest m;
            *m.mutable_header() = SmallHeader(psf_id);
            m.mutable_header()->set_upload_size(kHugeUpload);
            bool ok = stream->Write(m);
            m.mutable_chunk()->set_data(piece);
            ok = ok && stream->Write(m);
            while (ok && again()) ok = stream->Write(m);
            gave_up = ok && period > 0;
            if (gave_up) ctx.TryCancel();
            v1::ExtractResponse resp;
            while (stream->Read(&resp)) {
            }
            status_ = stream->Finish();
          }
          seconds_ = SecondsSince(t0);
        }) {}
  ~Trickle() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // After Join.
  const grpc::Status& status() const { return status_; }
  double seconds() const { return seconds_; }

 private:
  grpc::Status status_;
  double seconds_ = 0;
  std::thread thread_;
};

// 17 clients that announced 512 MiB and sent 1 byte every 3 s held all 16
// upload slots for ever (each byte reset --upload_idle_seconds). Here two slots, a
// floor of 2000 bytes/s over 1 s windows, and a byte every 300 ms.
TEST(SlowUploadTest, ATrickleOfBytesIsEndedByTheRateFloorAndFreesItsSlot) {
  server::ServerOptions o = TestServerOptions();
  o.scheduling.max_uploads = 2;
  o.scheduling.realtime_reserve = 0;
  o.limits.upload_idle_seconds = 30;
  o.limits.upload_min_bytes_per_second = 2000;
  o.limits.upload_rate_window_seconds = 1;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server, Once());
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  auto channel = Channel(*server);
  {
    Trickle image(channel, psf->id(), /*psf_upload=*/false, "x", 0.3, 10);
    Trickle psf_upload(channel, psf->id(), /*psf_upload=*/true, "x", 0.3, 10);
    ASSERT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 2; }, 5));
    image.Join();
    psf_upload.Join();
    for (const Trickle* t : {&image, &psf_upload}) {
      EXPECT_EQ(t->status().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
          << t->status().error_message();
      EXPECT_NE(t->status().error_message().find("--upload_min_bytes_per_second"),
                std::string::npos)
          << t->status().error_message();
      EXPECT_LT(t->seconds(), 4.0);
    }
  }
  EXPECT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 0; }, 5));
  EXPECT_EQ(MetricValue(*server, "spexd_uploads_aborted_total{reason=\"slow\"}"), 2);
  EXPECT_EQ(MetricValue(*server, "spexd_uploads_aborted_total{reason=\"idle\"}"), 0);
  ExpectStillServing(*server, psf->id());
}

// Empty chunks reset --upload_idle_seconds; they are no progress now. The floor
// is off here, so it is the idle timeout that ends them.
TEST(SlowUploadTest, EmptyChunksDoNotResetTheIdleTimeout) {
  server::ServerOptions o = TestServerOptions();
  o.scheduling.max_uploads = 2;
  o.scheduling.realtime_reserve = 0;
  o.limits.upload_idle_seconds = 1;
  o.limits.upload_min_bytes_per_second = 0;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server, Once());
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  auto channel = Channel(*server);
  {
    Trickle image(channel, psf->id(), /*psf_upload=*/false, "", 0.1, 8);
    Trickle psf_upload(channel, psf->id(), /*psf_upload=*/true, "", 0.1, 8);
    image.Join();
    psf_upload.Join();
    for (const Trickle* t : {&image, &psf_upload}) {
      // The watchdog cancels the call: the client sees CANCELLED (docs/service.md).
      EXPECT_EQ(t->status().error_code(), grpc::StatusCode::CANCELLED) << t->status().error_message();
      EXPECT_LT(t->seconds(), 4.0);
    }
  }
  EXPECT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 0; }, 5));
  EXPECT_EQ(MetricValue(*server, "spexd_uploads_aborted_total{reason=\"idle\"}"), 2);
  EXPECT_EQ(MetricValue(*server, "spexd_stalled_calls_total{kind=\"upload\"}"), 2);
  ExpectStillServing(*server, psf->id());
}

// A SIGTERM during an upload let the upload run to its end (6.5 s in the
// probe), then refused it. Uploads are refused as the drain starts; an extraction
// already admitted still finishes.
TEST(SlowUploadTest, ADrainRefusesUploadsAtOnceAndFinishesAdmittedWork) {
  server::ServerOptions o = TestServerOptions();
  o.limits.upload_min_bytes_per_second = 0;
  o.limits.upload_idle_seconds = 30;
  o.workers.backend_factory = [](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    *reason = "test: slow cpu";
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<SlowBackend>(*std::move(inner), 1.0));
    return out;
  };
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server, Once());
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  auto channel = Channel(*server);
  // Admitted work: started (its FrameHeader came) before the drain.
  std::atomic<bool> started{false};
  absl::Status admitted = absl::UnknownError("not finished");
  std::thread extraction([&] {
    auto client = Connect(*server, Once());
    v1::ExtractHeader h = SmallHeader(psf->id());
    h.set_server_path(Inputs().frame_path);
    client::ExtractCallbacks cb;
    cb.on_header = [&](const v1::FrameHeader&) {
      started.store(true);
      return absl::OkStatus();
    };
    admitted = client->Extract(h, nullptr, false, cb);
  });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }, 30));
  // One upload waiting for data, one sending 64 KiB every 50 ms, one PSF upload waiting.
  Trickle waiting(channel, psf->id(), /*psf_upload=*/false, std::string(1000, 'x'), 0, 10);
  Trickle sending(channel, psf->id(), /*psf_upload=*/false, std::string(64 << 10, 'x'), 0.05, 10);
  Trickle psf_waiting(channel, psf->id(), /*psf_upload=*/true, std::string(1000, 'x'), 0, 10);
  ASSERT_TRUE(WaitFor([&] { return c->GetServerInfo()->uploads_in_progress() == 3; }, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the waiting ones wait
  const auto t0 = Clock::now();
  std::thread drain([&] { server->Drain(absl::Seconds(30)); });
  waiting.Join();
  sending.Join();
  psf_waiting.Join();
  const double refused_after = SecondsSince(t0);
  EXPECT_EQ(waiting.status().error_code(), grpc::StatusCode::UNAVAILABLE)
      << waiting.status().error_message();
  EXPECT_EQ(sending.status().error_code(), grpc::StatusCode::UNAVAILABLE)
      << sending.status().error_message();
  // The sync LoadPsf read can only be cancelled: CANCELLED at the client.
  EXPECT_EQ(psf_waiting.status().error_code(), grpc::StatusCode::CANCELLED)
      << psf_waiting.status().error_message();
  EXPECT_LT(refused_after, 2.0);
  extraction.join();
  drain.join();
  EXPECT_TRUE(admitted.ok()) << admitted;
  EXPECT_EQ(MetricValue(*server, "spexd_uploads_aborted_total{reason=\"draining\"}"), 3);
}

}  // namespace
}  // namespace spexd::testing
