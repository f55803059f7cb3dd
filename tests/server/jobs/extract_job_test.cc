// ExtractJob without gRPC: a fake ResponseStream records what the job sends, a fake
// Backend hands over bundles (or fails, or waits for the cancel flag). Checks the order of
// the stream (header, bundles ascending in parts, summary), the per-Angstrom conversion,
// cancellation, deadlines, a stalled write, and the status each failure ends the call with.
#include "server/jobs/extract_job.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/task_pool.h"
#include "gtest/gtest.h"
#include "server/state/psf_cache.h"
#include "server/rpc/request_decode.h"
#include "tests/server/jobs/extract_job_fakes.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;
using job_fakes::FakeBackend;
using job_fakes::FakeStream;

class ExtractJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    psf_bytes_ = new std::string(testing::ReadBytes(testing::BundledPsfPath()));
    std::shared_ptr<const core::Psf> psf = testing::LoadBundledPsf();
    ASSERT_NE(psf, nullptr);
    auto frame = testing::MakeSyntheticPreproc(*psf, testing::SyntheticFrameOptions{});
    ASSERT_TRUE(frame.ok()) << frame.status();
    frame_bytes_ = new std::string(*std::move(frame));
  }
  static void TearDownTestSuite() {
    delete psf_bytes_;
    delete frame_bytes_;
  }

  void SetUp() override {
    ASSERT_NE(psf_bytes_, nullptr);
    auto loaded = cache_.Load(*psf_bytes_, "psf.fits");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    psf_id_ = loaded->id;
    env_.cache = &cache_;
  }

  // 50 fibres on 5760-5800 A in bundles of 10 (5 bundles), uploaded.
  v1::ExtractHeader Header() const {
    v1::ExtractHeader h;
    h.set_psf_id(psf_id_);
    h.set_upload_size(static_cast<int64_t>(frame_bytes_->size()));
    v1::ExtractionParams* p = h.mutable_params();
    p->set_wmin(5760.0);
    p->set_wmax(5800.0);
    p->set_dw(0.8);
    p->set_nspec(50);
    p->set_bundlesize(10);
    p->set_nsubbundles(2);
    return h;
  }

  // The header decoded as the server's edge decodes it (server/rpc/request_decode.h).
  JobRequest Request(const v1::ExtractHeader& header) {
    // ExtractBundles' rule for a header that selects bundles or fibres, else ExtractFrame's.
    const bool subset = header.bundles_size() > 0 || header.fibers_size() > 0;
    auto decoded = DecodeRequest(header, subset, env_.limits);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    if (!decoded.ok()) return JobRequest();
    JobRequest r = decoded->request;
    auto psf = cache_.Get(psf_id_);
    EXPECT_TRUE(psf.ok()) << psf.status();
    r.psf = *psf;
    auto params = CheckRequest(decoded->params, *r.psf, env_.limits);
    EXPECT_TRUE(params.ok()) << params.status();
    if (params.ok()) r.plan = *params;
    r.image.upload = *frame_bytes_;
    r.arrived = r.admitted = Clock::now();
    return r;
  }

  // Prepare and Run as the scheduler does, then drains the streaming stage. Returns
  // whether Run was reached.
  bool RunJob(JobRequest request, core::Backend& backend, FakeStream& stream) {
    return RunJob(std::move(request), backend, stream, pool_);
  }
  // The same with `streamer` as the streaming stage (shut down at the end).
  bool RunJob(JobRequest request, core::Backend& backend, FakeStream& stream,
              core::TaskPool& streamer) {
    auto job = std::make_shared<ExtractJob>(env_, std::move(request), &stream, cancel_);
    if (!job->Prepare()) {
      streamer.Shutdown();
      return false;
    }
    job->Run(backend, 0, streamer);
    streamer.Shutdown();
    return true;
  }

  static std::string* psf_bytes_;
  static std::string* frame_bytes_;
  PsfCache cache_{int64_t{1} << 30, nullptr};
  JobEnvironment env_;
  std::string psf_id_;
  std::shared_ptr<std::atomic<bool>> cancel_ = std::make_shared<std::atomic<bool>>(false);
  core::TaskPool pool_;
  void AddStreamer() { pool_.AddThreads(1); }
};

std::string* ExtractJobTest::psf_bytes_ = nullptr;
std::string* ExtractJobTest::frame_bytes_ = nullptr;

TEST_F(ExtractJobTest, HeaderThenBundlesInOrderAndInPartsThenSummary) {
  AddStreamer();
  // Messages small enough that a 10-fibre bundle needs 4 parts (3 fibres each at most).
  const core::ExtractionPlan p = *Request(Header()).plan;
  auto plan_probe = core::Geometry::Create(cache_.Get(psf_id_).value(), p, 4128, 4114,
                                           /*cache_spots=*/false);
  ASSERT_TRUE(plan_probe.ok()) << plan_probe.status();
  const int nwave = (*plan_probe)->plan().nwave;
  const int ndiag = (*plan_probe)->plan().ndiag;
  env_.limits.max_message_bytes =
      64 * 1024 + 3 * static_cast<int64_t>(BundleBytesPerFiber(nwave, ndiag));

  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kAll);
  ASSERT_TRUE(RunJob(Request(Header()), backend, stream));
  ASSERT_TRUE(stream.status().ok()) << stream.status();
  EXPECT_EQ(stream.finishes(), 1);

  const std::vector<v1::ExtractResponse> msgs = stream.messages();
  ASSERT_GE(msgs.size(), 2u);
  ASSERT_EQ(msgs.front().kind_case(), v1::ExtractResponse::kHeader);
  const v1::FrameHeader& h = msgs.front().header();
  EXPECT_EQ(h.nspec(), 50);
  EXPECT_EQ(h.bundlesize(), 10);
  EXPECT_EQ(h.wave_size(), nwave);
  EXPECT_EQ(std::vector<int>(h.bundles().begin(), h.bundles().end()),
            (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(h.backend(), "fake");
  ASSERT_EQ(msgs.back().kind_case(), v1::ExtractResponse::kSummary);

  // Bundles ascending, each as consecutive parts covering its fibres, the last marked.
  std::vector<int> order;
  int next_fiber = 0;
  int parts = 0;
  for (std::size_t i = 1; i + 1 < msgs.size(); ++i) {
    ASSERT_EQ(msgs[i].kind_case(), v1::ExtractResponse::kBundle) << i;
    const v1::BundleData& b = msgs[i].bundle();
    ++parts;
    EXPECT_LE(b.nfibers(), 3);
    EXPECT_EQ(b.fiber_begin(), next_fiber) << "bundle " << b.bundle();
    EXPECT_EQ(b.fiber_begin() / 10, b.bundle());
    next_fiber += b.nfibers();
    ASSERT_EQ(b.flux_size(), b.nfibers() * nwave);
    // Per Angstrom (FinalizeBundle): (bundle + 1) photons per 0.8 A bin.
    for (double f : b.flux()) ASSERT_NEAR(f, (b.bundle() + 1) / 0.8, 1e-9 * (b.bundle() + 1));
    if (b.last_part()) {
      order.push_back(b.bundle());
      EXPECT_EQ(b.counts().extracted(), 1);
      EXPECT_EQ(next_fiber % 10, 0);
    }
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(next_fiber, 50);
  EXPECT_EQ(parts, 5 * 4);  // 3 + 3 + 3 + 1 fibres

  const v1::ExtractSummary& s = msgs.back().summary();
  EXPECT_EQ(s.nbundles(), 5);
  EXPECT_EQ(s.nfibers(), 50);
  EXPECT_EQ(s.counts().extracted(), 5);
  EXPECT_EQ(s.usable_bins(), 50 * nwave);
  EXPECT_EQ(s.stage_seconds().at("fake"), 0.5);
  // The server's stages beside the backend's: every part of the streaming task
  // is timed, and the tail after the worker is part of the total.
  for (const char* stage : {"output_prepare", "output_finalize", "output_send", "output_release",
                            "stream_wait", "worker_sink_wait", "input_release", "output_tail"}) {
    ASSERT_EQ(s.stage_seconds().count(stage), 1u) << stage;
    EXPECT_GE(s.stage_seconds().at(stage), 0.0) << stage;
  }
  EXPECT_EQ(s.stage_seconds().count("output_copies"), 0u) << "no CUDA output region";
  EXPECT_LE(s.extract_seconds() + s.stage_seconds().at("output_tail"), s.total_seconds());
  // The last bundles' streaming after the worker's end is a part of that tail.
  ASSERT_EQ(s.stage_seconds().count("output_tail_bundles"), 1u);
  EXPECT_GE(s.stage_seconds().at("output_tail_bundles"), 0.0);
  EXPECT_LE(s.stage_seconds().at("output_tail_bundles"), s.stage_seconds().at("output_tail"));
  // The load's parts, each timed from where the last one ended, lie inside it.
  double load_parts = 0;
  for (const char* stage : {"load_open", "load_decode", "load_output"}) {
    ASSERT_EQ(s.stage_seconds().count(stage), 1u) << stage;
    EXPECT_GE(s.stage_seconds().at(stage), 0.0) << stage;
    load_parts += s.stage_seconds().at(stage);
  }
  EXPECT_GT(load_parts, 0.0);
  EXPECT_LE(load_parts, s.load_seconds());
}

// Bundles that reach the streaming task together (a GPU batch's) are prepared at once on
// the host pool and still stream in order, each per Angstrom once, in float64 and float32:
// the first bundle's send is slow, so the other four wait for the task together.
TEST_F(ExtractJobTest, BundlesArrivingTogetherStreamInOrderEachFinalizedOnce) {
  core::TaskPool host_pool;
  host_pool.AddThreads(4);
  env_.decode_pool = &host_pool;
  for (const bool f32 : {false, true}) {
    SCOPED_TRACE(f32 ? "float32" : "float64");
    v1::ExtractHeader header = Header();
    if (f32) header.set_array_precision(v1::ARRAY_FLOAT32);
    FakeStream stream(cancel_);
    stream.DelayAt(1, std::chrono::milliseconds(200));  // 0 is the header
    FakeBackend backend(FakeBackend::Mode::kAll);
    core::TaskPool streamer;  // a streaming stage of its own per precision
    streamer.AddThreads(1);
    ASSERT_TRUE(RunJob(Request(header), backend, stream, streamer));
    ASSERT_TRUE(stream.status().ok()) << stream.status();
    const std::vector<v1::ExtractResponse> msgs = stream.messages();
    ASSERT_GE(msgs.size(), 2u);
    std::vector<int> order;
    for (const v1::ExtractResponse& m : msgs) {
      if (!m.has_bundle()) continue;
      const v1::BundleData& b = m.bundle();
      order.push_back(b.bundle());
      const double want = (b.bundle() + 1) / 0.8;  // (bundle + 1) photons per 0.8 A bin
      if (f32) {
        ASSERT_EQ(b.flux_f32().size() % sizeof(float), 0u);
        std::vector<float> flux(b.flux_f32().size() / sizeof(float));
        std::memcpy(flux.data(), b.flux_f32().data(), b.flux_f32().size());
        ASSERT_FALSE(flux.empty());
        for (float f : flux) ASSERT_EQ(f, static_cast<float>(want)) << "bundle " << b.bundle();
      } else {
        ASSERT_GT(b.flux_size(), 0);
        for (double f : b.flux()) ASSERT_NEAR(f, want, 1e-12 * want) << "bundle " << b.bundle();
      }
    }
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    const v1::ExtractSummary& s = msgs.back().summary();
    EXPECT_EQ(s.nbundles(), 5);
    EXPECT_EQ(s.usable_bins(), int64_t{5} * 10 * msgs.front().header().wave_size());
    EXPECT_EQ(s.stage_seconds().count("output_prepare"), 1u);
  }
}

TEST_F(ExtractJobTest, ASubsetStreamsOnlyItsBundles) {
  AddStreamer();
  v1::ExtractHeader header = Header();
  header.add_bundles(3);
  header.add_bundles(1);
  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kAll);
  ASSERT_TRUE(RunJob(Request(header), backend, stream));
  ASSERT_TRUE(stream.status().ok()) << stream.status();
  std::vector<int> order;
  for (const auto& m : stream.messages()) {
    if (m.has_bundle() && m.bundle().last_part()) order.push_back(m.bundle().bundle());
  }
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
  EXPECT_EQ(stream.messages().back().summary().nbundles(), 2);
}

// The client cancels while the backend works: the backend sees the flag and stops, the
// call ends CANCELLED after what was streamed, without a summary.
TEST_F(ExtractJobTest, CancellationEndsTheCallCancelledWithoutASummary) {
  AddStreamer();
  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kWaitForCancel);
  std::thread client([&] {
    while (stream.IndexOf(v1::ExtractResponse::kBundle) < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    cancel_->store(true);
  });
  ASSERT_TRUE(RunJob(Request(Header()), backend, stream));
  client.join();
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kCancelled) << stream.status();
  EXPECT_EQ(stream.finishes(), 1);
  EXPECT_EQ(stream.IndexOf(v1::ExtractResponse::kSummary), -1);
  EXPECT_EQ(backend.handed_over.load(), 1);
}

// The deadline passes during the extraction (or, on a loaded machine, before it starts):
// the sink refuses the next bundle and the call ends DEADLINE_EXCEEDED, not CANCELLED.
TEST_F(ExtractJobTest, ADeadlineStopsTheExtractionAsDeadlineExceeded) {
  AddStreamer();
  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kUntilSinkStops);
  JobRequest request = Request(Header());
  request.deadline = Clock::now() + std::chrono::seconds(1);
  RunJob(std::move(request), backend, stream);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kDeadlineExceeded) << stream.status();
  EXPECT_EQ(stream.IndexOf(v1::ExtractResponse::kSummary), -1);
  EXPECT_LT(backend.handed_over.load(), 60);  // one per 20 ms until the deadline
}

// A client that stops reading: the write stalls until the watchdog cancels the call
// (here the fake stream, after 500 ms); the streaming stops there, the call ends
// CANCELLED with no further message, and the worker was not held by the stall.
TEST_F(ExtractJobTest, AStalledWriteEndsTheCallAtTheWriteTimeout) {
  AddStreamer();
  FakeStream stream(cancel_);
  stream.StallAt(2, std::chrono::milliseconds(500));  // header, bundle 0, then stall
  FakeBackend backend(FakeBackend::Mode::kAll);
  auto job = std::make_shared<ExtractJob>(env_, Request(Header()), &stream, cancel_);
  ASSERT_TRUE(job->Prepare());
  const Clock::time_point start = Clock::now();
  job->Run(backend, 0, pool_);
  const double worker_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  pool_.Shutdown();
  EXPECT_LT(worker_seconds, 0.4) << "the worker waited for the stalled client";
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kCancelled) << stream.status();
  const std::vector<v1::ExtractResponse> msgs = stream.messages();
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_TRUE(msgs[0].has_header());
  EXPECT_EQ(msgs[1].bundle().bundle(), 0);
  EXPECT_EQ(backend.handed_over.load(), 5);
}

// A client gone at once (the header write fails): the backend never runs.
TEST_F(ExtractJobTest, AClientGoneBeforeTheHeaderSkipsTheBackend) {
  AddStreamer();
  FakeStream stream(cancel_);
  stream.FailFrom(0);
  FakeBackend backend(FakeBackend::Mode::kAll);
  ASSERT_TRUE(RunJob(Request(Header()), backend, stream));
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kCancelled) << stream.status();
  EXPECT_EQ(backend.handed_over.load(), 0);
  EXPECT_EQ(stream.finishes(), 1);
}

TEST_F(ExtractJobTest, ABackendErrorEndsTheCallWithItsStatus) {
  AddStreamer();
  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kFailAfterOne, absl::InternalError("device lost"));
  ASSERT_TRUE(RunJob(Request(Header()), backend, stream));
  EXPECT_EQ(stream.status(), absl::InternalError("device lost"));
  EXPECT_EQ(stream.IndexOf(v1::ExtractResponse::kSummary), -1);
  EXPECT_EQ(stream.finishes(), 1);
}

TEST_F(ExtractJobTest, OutOfHostMemoryInTheBackendIsResourceExhausted) {
  AddStreamer();
  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kThrowAfterOne);
  ASSERT_TRUE(RunJob(Request(Header()), backend, stream));
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kResourceExhausted) << stream.status();
}

TEST_F(ExtractJobTest, AResultWithoutUsableBinsIsFailedPrecondition) {
  AddStreamer();
  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kNoUsableBins);
  ASSERT_TRUE(RunJob(Request(Header()), backend, stream));
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kFailedPrecondition) << stream.status();
  EXPECT_EQ(stream.IndexOf(v1::ExtractResponse::kSummary), -1);
}

// Records the planes it is given: raw, float32 or float64, and their values ruled and
// widened.
class PlaneRecordingBackend : public FakeBackend, public core::GpuCapabilities {
 public:
  explicit PlaneRecordingBackend(bool takes_float32, bool takes_raw = false)
      : FakeBackend(Mode::kAll), takes_float32_(takes_float32), takes_raw_(takes_raw) {}
  core::GpuCapabilities* gpu() override { return this; }
  bool TakesFloat32Planes() const override { return takes_float32_; }
  bool TakesRawPlanes() const override { return takes_raw_; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    if (absl::Status s = core::ValidateJob(job, takes_float32_, takes_raw_); !s.ok()) return s;
    core::PreprocImage copy = *job.image;
    saw_float32 = copy.has_float32_planes();
    saw_raw = copy.has_raw_planes();
    core::WidenPlanes(&copy);  // raw planes decoded and ruled first, as the device does
    image = copy.image;
    ivar = copy.ivar;
    return FakeBackend::Extract(job, sink);
  }
  bool saw_float32 = false, saw_raw = false;
  std::vector<double> image, ivar;

 private:
  bool takes_float32_, takes_raw_;
};

// The server keeps raw or float32 planes for backends that take them (the CUDA backend),
// and a backend that does not still gets decoded, ruled ones: the same values whichever,
// bit for bit.
TEST_F(ExtractJobTest, Float32PlanesOnlyForABackendThatTakesThemSameValues) {
  auto reference = core::ReadPreprocFromMemory(frame_bytes_->data(), frame_bytes_->size(),
                                               "frame.fits", core::PreprocOptions{});
  ASSERT_TRUE(reference.ok()) << reference.status();
  core::TaskPool decode_pool;
  decode_pool.AddThreads(2);
  core::PlaneBufferPool buffers(int64_t{1} << 30);
  std::atomic<bool> float32{true}, raw{false};
  env_.decode_pool = &decode_pool;
  env_.plane_buffers = &buffers;
  env_.float32_planes = &float32;
  env_.raw_planes = &raw;
  for (int kind = 0; kind < 4; ++kind) {
    // 0: float64 only; 1: float32; 2: raw and float32; 3: raw kept, met by float32 only.
    const bool takes = kind != 0, takes_raw = kind == 2;
    raw = kind >= 2;
    SCOPED_TRACE(absl::StrCat("kind ", kind));
    core::TaskPool streaming;
    streaming.AddThreads(1);
    FakeStream stream(cancel_);
    PlaneRecordingBackend backend(takes, takes_raw);
    auto job = std::make_shared<ExtractJob>(env_, Request(Header()), &stream, cancel_);
    ASSERT_TRUE(job->Prepare());
    job->Run(backend, 0, streaming);
    streaming.Shutdown();
    EXPECT_TRUE(stream.status().ok()) << stream.status();
    EXPECT_EQ(backend.saw_float32, takes && !takes_raw);
    EXPECT_EQ(backend.saw_raw, takes_raw);
    ASSERT_EQ(backend.image.size(), reference->image.size());
    EXPECT_TRUE(std::memcmp(backend.image.data(), reference->image.data(),
                            backend.image.size() * sizeof(double)) == 0);
    EXPECT_TRUE(std::memcmp(backend.ivar.data(), reference->ivar.data(),
                            backend.ivar.size() * sizeof(double)) == 0);
  }
}

// Failures while preparing end the call from the loader thread: Run never follows.
TEST_F(ExtractJobTest, BadImagesEndTheCallInPrepare) {
  {
    FakeStream stream(cancel_);
    FakeBackend backend(FakeBackend::Mode::kAll);
    JobRequest request = Request(Header());
    request.image.upload = "SIMPLE  =                    T / not really a FITS file";
    EXPECT_FALSE(RunJob(std::move(request), backend, stream));
    EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument) << stream.status();
    EXPECT_TRUE(stream.messages().empty());
  }
  {
    core::TaskPool pool;
    FakeStream stream(cancel_);
    env_.limits.max_image_pixels = 1000;
    auto job = std::make_shared<ExtractJob>(env_, Request(Header()), &stream, cancel_);
    EXPECT_FALSE(job->Prepare());
    EXPECT_EQ(stream.status().code(), absl::StatusCode::kResourceExhausted) << stream.status();
    EXPECT_NE(stream.status().message().find("--max_image_pixels"), std::string::npos);
  }
}

// Run after the streaming stage has shut down (drain): the call ends UNAVAILABLE at once
// and the backend is not started.
TEST_F(ExtractJobTest, AStoppedStreamingStageEndsTheCallUnavailable) {
  FakeStream stream(cancel_);
  FakeBackend backend(FakeBackend::Mode::kAll);
  auto job = std::make_shared<ExtractJob>(env_, Request(Header()), &stream, cancel_);
  ASSERT_TRUE(job->Prepare());
  pool_.Shutdown();
  job->Run(backend, 0, pool_);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kUnavailable) << stream.status();
  EXPECT_EQ(backend.handed_over.load(), 0);
  EXPECT_EQ(stream.finishes(), 1);
}

}  // namespace
}  // namespace spexd::server
