// ExtractExposure: an exposure as one job. Its frame files must be byte
// for byte those of single-frame server-written extractions of the same inputs; a bad
// entry fails alone; a malformed request is refused whole; cancel, deadline and drain
// stop or finish it as they do single frames; the metrics count its frames.
#include <atomic>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "client/spexctl/remote_exposure.h"
#include "client/lib/spexd_client.h"
#include "core/backend/backend.h"
#include "core/io/fits_gunzip.h"
#include "gtest/gtest.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// Two frame files (inflated when gzip) record by record: only the CHECKSUM and DATASUM
// cards may differ (CFITSIO writes the time into their comments), at the same place.
void ExpectSameFrameFile(const std::string& a_path, const std::string& b_path) {
  std::string a = ReadBytes(a_path), b = ReadBytes(b_path);
  auto gzip = [](const std::string& s) { return s.size() > 2 && s[0] == '\x1f' && s[1] == '\x8b'; };
  if (gzip(a)) {
    auto inflated = core::GunzipFits(a, a_path, core::FitsSizeLimits{});
    ASSERT_TRUE(inflated.ok()) << inflated.status();
    a = *std::move(inflated);
    ASSERT_TRUE(gzip(b)) << b_path;
    auto b_inflated = core::GunzipFits(b, b_path, core::FitsSizeLimits{});
    ASSERT_TRUE(b_inflated.ok()) << b_inflated.status();
    b = *std::move(b_inflated);
  }
  ASSERT_GT(a.size(), 2880u) << a_path;
  ASSERT_EQ(a.size(), b.size()) << a_path << " vs " << b_path;
  for (std::size_t off = 0; off < a.size(); off += 80) {
    if (a.compare(off, 80, b, off, 80) == 0) continue;
    const std::string ka = a.substr(off, 8), kb = b.substr(off, 8);
    ASSERT_TRUE((ka == "CHECKSUM" || ka == "DATASUM ") && ka == kb)
        << a_path << " and " << b_path << " differ at byte " << off << ":\n  " << a.substr(off, 80)
        << "\n  " << b.substr(off, 80);
  }
}

// A frame of the exposure: the small test extraction of `input` with `psf_id`, written to
// `output`, with the names spexctl would give.
v1::ExtractHeader FrameHeader(const std::string& psf_id, const std::string& input,
                              const std::string& output, const std::string& psf_name) {
  v1::ExtractHeader h = SmallHeader(psf_id);
  h.set_server_path(input);
  h.set_server_output_path(output);
  h.set_in_img_name(input);
  h.set_in_psf_name(psf_name);
  return h;
}

struct Collected {
  std::map<int, v1::ExposureFrameResult> frames;
  absl::StatusOr<v1::ExposureSummary> summary = absl::UnknownError("not run");
};

Collected RunExposure(client::SpexdClient& c, const v1::ExposureRequest& request) {
  Collected out;
  out.summary = c.ExtractExposure(request, [&](const v1::ExposureFrameResult& r) {
    EXPECT_EQ(out.frames.count(r.index()), 0u) << "frame " << r.index() << " reported twice";
    out.frames[r.index()] = r;
    return absl::OkStatus();
  });
  return out;
}

class ExposureTest : public LoadedServerTest {
 protected:
  std::string Out(const std::string& name) { return Inputs().output_dir + "/" + name; }
  std::string LoadGzPsf() {
    auto psf = client_->LoadPsfFromServerPath(Inputs().psf_gz_path);
    EXPECT_TRUE(psf.ok()) << psf.status();
    return psf.ok() ? psf->id() : "";
  }
};

TEST_F(ExposureTest, FramesAreByteIdenticalToSingleFramesAndABadEntryFailsAlone) {
  const std::string gz_id = LoadGzPsf();
  ASSERT_FALSE(gz_id.empty());
  const double ok_before = MetricValue(*server_, "spexd_exposure_frames_total{code=\"OK\"}");
  // Good frames over two PSFs (two ids: the .gz's bytes differ) and two inputs.
  struct Good {
    std::string psf_id, psf_name, input, name;
  };
  const std::vector<Good> good = {
      {psf_id_, "psf.fits", Inputs().frame_path, "exp-a.fits"},
      {gz_id, Inputs().psf_gz_path, Inputs().frame_gz_path, "exp-b.fits"},
      {gz_id, Inputs().psf_gz_path, Inputs().frame_path, "exp-c.fits.gz"},
  };
  const std::string existing = Out("exp-existing.fits");
  { std::ofstream(existing) << "not a frame"; }
  v1::ExposureRequest request;
  request.set_client_tag("exposure-test");
  for (const Good& g : good) {
    std::remove(Out(g.name).c_str());
    *request.add_frames() = FrameHeader(g.psf_id, g.input, Out(g.name), g.psf_name);
  }
  // Bad entries, each failing as it would alone: a missing input, an existing output
  // without overwrite, a PSF that is not loaded.
  *request.add_frames() = FrameHeader(psf_id_, Inputs().data_dir + "/no-such-frame.fits",
                                      Out("exp-missing.fits"), "psf.fits");
  *request.add_frames() = FrameHeader(psf_id_, Inputs().frame_path, existing, "psf.fits");
  *request.add_frames() = FrameHeader(std::string(64, 'a'), Inputs().frame_path,
                                      Out("exp-nopsf.fits"), "psf.fits");
  Collected got = RunExposure(*client_, request);
  ASSERT_TRUE(got.summary.ok()) << got.summary.status();
  EXPECT_EQ(got.summary->frames(), 6);
  EXPECT_EQ(got.summary->succeeded(), 3);
  EXPECT_EQ(got.summary->failed(), 3);
  ASSERT_EQ(got.frames.size(), 6u);
  EXPECT_EQ(got.frames[3].code(), static_cast<int>(absl::StatusCode::kNotFound)) << got.frames[3].message();
  EXPECT_EQ(got.frames[4].code(), static_cast<int>(absl::StatusCode::kAlreadyExists))
      << got.frames[4].message();
  EXPECT_EQ(got.frames[5].code(), static_cast<int>(absl::StatusCode::kNotFound)) << got.frames[5].message();
  EXPECT_EQ(ReadBytes(existing), "not a frame");  // never replaced

  // The same frames one by one through ExtractFrame, the server writing them.
  for (std::size_t i = 0; i < good.size(); ++i) {
    const v1::ExposureFrameResult& r = got.frames[static_cast<int>(i)];
    ASSERT_EQ(r.code(), 0) << r.message();
    EXPECT_EQ(r.server_output_path(), Out(good[i].name));
    EXPECT_EQ(r.summary().server_output_path(), Out(good[i].name));
    EXPECT_EQ(r.summary().nfibers(), SmallParams().nspec);
    const std::string single = Out("single-" + good[i].name);
    std::remove(single.c_str());
    v1::ExtractHeader h = FrameHeader(good[i].psf_id, good[i].input, single, good[i].psf_name);
    ASSERT_TRUE(client_->Extract(h, nullptr, false, {}).ok());
    ExpectSameFrameFile(Out(good[i].name), single);
  }
  EXPECT_EQ(MetricValue(*server_, "spexd_exposure_frames_total{code=\"OK\"}") - std::max(0.0, ok_before), 3);
  EXPECT_EQ(MetricValue(*server_, "spexd_exposure_frames_total{code=\"ALREADY_EXISTS\"}"), 1);
  EXPECT_GE(MetricValue(*server_, "spexd_exposure_duration_seconds_count"), 1);
  EXPECT_GE(MetricValue(*server_, "spexd_requests_total{code=\"OK\",rpc=\"ExtractExposure\"}"), 1);
}

TEST_F(ExposureTest, AMalformedRequestIsRefusedWholeNamingTheEntry) {
  auto refused = [&](v1::ExposureRequest request, const std::string& needle) {
    Collected got = RunExposure(*client_, request);
    ASSERT_FALSE(got.summary.ok());
    EXPECT_EQ(got.summary.status().code(), absl::StatusCode::kInvalidArgument) << got.summary.status();
    EXPECT_NE(got.summary.status().message().find(needle), std::string::npos) << got.summary.status();
    EXPECT_TRUE(got.frames.empty());  // nothing started
  };
  refused(v1::ExposureRequest(), "at least one frame");
  v1::ExposureRequest upload;
  *upload.add_frames() = FrameHeader(psf_id_, Inputs().frame_path, Out("m1.fits"), "psf.fits");
  upload.add_frames()->set_upload_size(100);
  refused(upload, "frames[1]");
  v1::ExposureRequest no_output;
  *no_output.add_frames() = FrameHeader(psf_id_, Inputs().frame_path, "", "psf.fits");
  refused(no_output, "server_output_path");
  v1::ExposureRequest twice;
  *twice.add_frames() = FrameHeader(psf_id_, Inputs().frame_path, Out("m2.fits"), "psf.fits");
  *twice.add_frames() = FrameHeader(psf_id_, Inputs().frame_path, Out("m2.fits"), "psf.fits");
  refused(twice, "frames[1]");
  // A parameter out of range is the frame's own result, as for ExtractFrame alone.
  v1::ExposureRequest bad_param;
  *bad_param.add_frames() = FrameHeader(psf_id_, Inputs().frame_path, Out("m3.fits"), "psf.fits");
  bad_param.mutable_frames(0)->mutable_params()->set_nspec(-3);
  Collected got = RunExposure(*client_, bad_param);
  ASSERT_TRUE(got.summary.ok()) << got.summary.status();
  ASSERT_EQ(got.frames.size(), 1u);
  EXPECT_EQ(got.frames[0].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
}

// The frame list: spexctl's parser and the client library's RunExposure.
TEST_F(ExposureTest, FrameListRunsAndRefusesSyntaxErrorsWhole) {
  const std::string list = absl::StrCat(
      "# preproc psf output [flags]\n\n", Inputs().frame_path, " ", Inputs().psf_path, " ",
      Out("list-a.fits"), "\n", Inputs().frame_gz_path, "\t", Inputs().psf_gz_path, " ",
      Out("list-b.fits"), " --nsubbundles 5\n", Inputs().frame_path, " ",
      Inputs().data_dir + "/no-psf.fits", " ", Out("list-c.fits"), "\n");
  const std::vector<std::string> common = {"-w", "5760.0,5800.0,0.8", "-s", "0", "-n", "50"};
  auto entries = client::ParseFrameList(list, "frames.txt", common);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[1].line, 4);
  EXPECT_EQ((*entries)[1].header.params().nspec(), 50);
  for (const char* name : {"list-a.fits", "list-b.fits"}) std::remove(Out(name).c_str());
  client::ExposureOptions options;
  int seen = 0;
  auto outcome = client::RunExposure(*client_, *entries, options,
                                     [&](const v1::ExposureFrameResult&) { ++seen; });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(outcome->summary.succeeded(), 2);
  EXPECT_EQ(outcome->frames[0].code(), 0) << outcome->frames[0].message();
  EXPECT_EQ(outcome->frames[1].code(), 0) << outcome->frames[1].message();
  EXPECT_NE(outcome->frames[2].code(), 0);  // its PSF does not load: that frame alone
  EXPECT_NE(outcome->frames[2].message().find("no-psf.fits"), std::string::npos);

  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"a.fits psf.fits\n", "frames.txt:1: expected PREPROC PSF OUTPUT"},
           {"# c\na.fits psf.fits o.fits --no-such-flag\n", "frames.txt:2:"},
           {"a.fits psf.fits o.fits -n x\n", "frames.txt:1:"},
           {"a.fits psf.fits o.fits --server h:1\n", "frames.txt:1:"},
           {"a.fits psf.fits o.fits extra\n", "after OUTPUT"},
           {"a.fits p.fits o.fits\nb.fits p.fits o.fits\n", "frames.txt:2: OUTPUT"},
           // One file however spelled: `//` and `/./` (the server resolves symlinks too).
           {"a.fits p.fits /x//o.fits\nb.fits p.fits /x/./o.fits\n", "frames.txt:2: OUTPUT"},
           {"# nothing\n", "no frames"}}) {
    auto bad = client::ParseFrameList(text, "frames.txt", common);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(needle), std::string::npos) << bad.status();
  }
}

// `spexctl exposure` itself: a frame list with a bad line, against `spexctl extract
// --server-path --server-output-path` of the same frame; a syntax error exits 2.
TEST_F(ExposureTest, SpexctlExposureWritesWhatSpexctlExtractWrites) {
  auto spexctl = [](const std::string& args, std::string* output) {
    const std::string cmd = absl::StrCat("timeout 120 ", SPEXCTL_BINARY, " ", args, " 2>&1");
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return -1;
    char buf[4096];
    while (std::fgets(buf, sizeof(buf), pipe) != nullptr) *output += buf;
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const std::string server = absl::StrCat("--server 127.0.0.1:", server_->port());
  const std::string params = "-w 5760.0,5800.0,0.8 -n 50";
  const std::string a = Out("cli-a.fits"), b = Out("cli-b.fits"), single = Out("cli-single.fits");
  for (const std::string& p : {a, b, single}) std::remove(p.c_str());
  const std::string list = Out("frames.txt");
  {
    std::ofstream f(list);
    f << "# PREPROC PSF OUTPUT [flags]\n"
      << Inputs().frame_path << " " << Inputs().psf_copy << " " << a << "\n"
      << Inputs().data_dir << "/missing.fits " << Inputs().psf_copy << " " << Out("cli-m.fits") << "\n"
      << Inputs().frame_path << " " << Inputs().psf_copy << " " << b << " --nsubbundles 5\n";
  }
  std::string out;
  EXPECT_EQ(spexctl(absl::StrCat("exposure ", server, " ", params, " ", list), &out), 1) << out;
  EXPECT_NE(out.find("OK\t" + a), std::string::npos) << out;
  EXPECT_NE(out.find("OK\t" + b), std::string::npos) << out;
  EXPECT_NE(out.find("NOT_FOUND\t" + Out("cli-m.fits") + "\tline 3:"), std::string::npos) << out;
  EXPECT_NE(out.find("3 frames, 2 written, 1 failed"), std::string::npos) << out;
  std::string single_out;
  ASSERT_EQ(spexctl(absl::StrCat("extract ", server, " --server-path -q ", params, " -i ",
                                 Inputs().frame_path, " -p ", Inputs().psf_copy, " -o ",
                                 Out("cli-client.fits"), " --server-output-path ", single),
                    &single_out),
            0)
      << single_out;
  ExpectSameFrameFile(a, single);
  ExpectSameFrameFile(b, single);
  // An existing output is replaced with --overwrite; without it, the same frame is kept
  // (a re-run gets the same answer) and another one is that frame's failure.
  out.clear();
  EXPECT_EQ(spexctl(absl::StrCat("exposure ", server, " ", params, " --overwrite ", list), &out), 1);
  EXPECT_NE(out.find("2 written"), std::string::npos) << out;
  const std::string a_bytes = ReadBytes(a);
  out.clear();
  EXPECT_EQ(spexctl(absl::StrCat("exposure ", server, " ", params, " ", list), &out), 1);
  EXPECT_NE(out.find("OK\t" + a), std::string::npos) << out;
  EXPECT_EQ(ReadBytes(a), a_bytes);
  out.clear();
  EXPECT_EQ(spexctl(absl::StrCat("exposure ", server, " ", params, " --no-scores ", list), &out), 1);
  EXPECT_NE(out.find("ALREADY_EXISTS\t" + a), std::string::npos) << out;
  {
    std::ofstream f(list);
    f << Inputs().frame_path << " " << Inputs().psf_copy << " " << a << "\n"
      << Inputs().frame_path << " " << Inputs().psf_copy << " " << b << " -m model.fits\n";
  }
  out.clear();
  EXPECT_EQ(spexctl(absl::StrCat("exposure ", server, " ", list), &out), 2);
  EXPECT_NE(out.find("frames.txt:2:"), std::string::npos) << out;
}

// A slow one-worker server: each bundle takes `seconds`.
std::unique_ptr<server::SpexdServer> StartSlowExposureServer(double seconds) {
  server::ServerOptions o = TestServerOptions();
  o.workers.backend_factory = [seconds](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<SlowBackend>(*std::move(inner), seconds));
    *reason = "test: slow cpu";
    return out;
  };
  return StartServer(o);
}

v1::ExposureRequest SlowExposure(const std::string& psf_id, const std::string& prefix, int n) {
  v1::ExposureRequest request;
  for (int i = 0; i < n; ++i) {
    const std::string out = absl::StrCat(Inputs().output_dir, "/", prefix, i, ".fits");
    std::remove(out.c_str());
    *request.add_frames() = FrameHeader(psf_id, Inputs().frame_path, out, "psf.fits");
  }
  return request;
}

TEST(ExposureStopTest, CancelStopsEveryFrameNotFinishedAndTheServerServesOn) {
  auto server = StartSlowExposureServer(0.3);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  int seen = 0;
  const auto start = std::chrono::steady_clock::now();
  double first_frame_s = 0;  // one frame's pace on this machine (a loaded CI host: ~4 s)
  auto summary = c->ExtractExposure(SlowExposure(psf->id(), "cancel-", 6),
                                    [&](const v1::ExposureFrameResult& r) {
                                      ++seen;
                                      first_frame_s = std::chrono::duration<double>(
                                          std::chrono::steady_clock::now() - start).count();
                                      EXPECT_EQ(r.code(), 0) << r.message();
                                      return absl::CancelledError("enough");  // cancel
                                    });
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(seen, 1);
  // The other five stop (cancelled), without running to the end, and the server's in-flight
  // count returns to 0. Running to the end takes five more frames; a bundle already on the
  // worker finishes first (extraction stops between bundles), so the bound is one frame's
  // time plus 2.5 s: a fixed bound failed on a loaded CI host where one bundle took ~2 s.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] {
    return MetricValue(*server, "spexd_exposure_frames_total{code=\"CANCELLED\"}") >= 5;
  }, 10 + first_frame_s)) << MetricValue(*server, "spexd_exposure_frames_total{code=\"CANCELLED\"}");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            2.5 + first_frame_s);
  EXPECT_TRUE(WaitFor([&] { return MetricValue(*server, "spexd_inflight_requests") == 0; }, 10));
  v1::ExtractHeader h = SmallHeader(psf->id());
  h.set_server_path(Inputs().frame_path);
  EXPECT_TRUE(c->Extract(h, nullptr, false, {}).ok());  // still serving
}

TEST(ExposureStopTest, OneDeadlineCoversTheWholeExposure) {
  auto server = StartSlowExposureServer(0.3);
  ASSERT_NE(server, nullptr);
  client::ClientOptions co;
  co.extract_deadline_seconds = 1.0;  // about one frame of the six
  co.max_attempts = 1;
  auto c = Connect(*server, co);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = c->ExtractExposure(SlowExposure(psf->id(), "deadline-", 6),
                                    [](const v1::ExposureFrameResult&) { return absl::OkStatus(); });
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDeadlineExceeded) << summary.status();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_TRUE(WaitFor([&] {
    return MetricValue(*server, "spexd_exposure_frames_total{code=\"DEADLINE_EXCEEDED\"}") >= 4;
  }, 10));
}

TEST(ExposureStopTest, DrainFinishesAnAdmittedExposureAndRefusesANewOne) {
  auto server = StartSlowExposureServer(0.1);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  Collected got;
  std::atomic<bool> first{false};
  std::thread exposure([&] {
    got.summary = c->ExtractExposure(SlowExposure(psf->id(), "drain-", 4),
                                     [&](const v1::ExposureFrameResult& r) {
                                       got.frames[r.index()] = r;
                                       first.store(true);
                                       return absl::OkStatus();
                                     });
  });
  ASSERT_TRUE(WaitFor([&] { return first.load(); }, 20));
  std::thread drain([&] { server->Drain(absl::Seconds(30)); });
  ASSERT_TRUE(WaitFor([&] {
    auto health = c->CheckHealth();
    return !health.ok() || *health != "SERVING";
  }, 10));
  client::ClientOptions co;
  co.max_attempts = 1;
  auto late = Connect(*server, co);
  if (late != nullptr) {
    auto refused = late->ExtractExposure(SlowExposure(psf->id(), "late-", 1),
                                         [](const v1::ExposureFrameResult&) { return absl::OkStatus(); });
    EXPECT_FALSE(refused.ok());  // UNAVAILABLE (draining), or the listener already closed
  }
  exposure.join();
  drain.join();
  ASSERT_TRUE(got.summary.ok()) << got.summary.status();
  EXPECT_EQ(got.summary->succeeded(), 4);  // admitted as a whole: every frame finished
}

// An exposure without a deadline behind single frames that have one (spexctl sets one):
// its frames get the no-deadline horizon too, counted from each frame's submission. With
// a tiny horizon they are due at once and go before the queued single frames (after the
// one extracting and those already prepared); with 0 (the old order) after all of them.
// Returns how many of the 8 single frames had finished when the exposure did.
int SingleFramesDoneBeforeAnExposureWithoutADeadline(double horizon_seconds) {
  server::ServerOptions o = TestServerOptions();
  o.scheduling.no_deadline_horizon_seconds = horizon_seconds;
  o.workers.backend_factory = [](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<SlowBackend>(*std::move(inner), 0.1));
    *reason = "test: slow cpu";
    return out;
  };
  auto server = StartServer(o);
  EXPECT_NE(server, nullptr);
  if (server == nullptr) return -1;
  client::ClientOptions with_deadline;
  with_deadline.extract_deadline_seconds = 60;
  auto c = Connect(*server, with_deadline);
  auto psf = c->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  EXPECT_TRUE(psf.ok()) << psf.status();
  if (!psf.ok()) return -1;
  constexpr int kSingles = 8;
  std::atomic<int> singles_done{0};
  std::vector<std::thread> singles;
  for (int i = 0; i < kSingles; ++i) {
    singles.emplace_back([&] {
      v1::ExtractHeader h = SmallHeader(psf->id());
      h.set_server_path(Inputs().frame_path);
      EXPECT_TRUE(c->Extract(h, nullptr, false, {}).ok());
      singles_done.fetch_add(1);
    });
  }
  EXPECT_TRUE(WaitFor([&] {
    auto info = c->GetServerInfo();
    // Every single frame admitted (a frame between its worker and its client is in none).
    return info.ok() && info->queue_depth() + info->running() + singles_done.load() >= kSingles;
  }, 10));
  // A raw call: the test clients (Connect) always set a deadline.
  auto stub = v1::Extraction::NewStub(Channel(*server));
  grpc::ClientContext ctx;
  auto reader = stub->ExtractExposure(
      &ctx, SlowExposure(psf->id(), absl::StrCat("horizon-", horizon_seconds, "-"), 2));
  v1::ExposureResponse response;
  int succeeded = -1;
  while (reader->Read(&response)) {
    if (response.has_summary()) succeeded = response.summary().succeeded();
  }
  const int done = singles_done.load();
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(succeeded, 2);
  for (std::thread& t : singles) t.join();
  return done;
}

TEST(ExposureSchedulingTest, FramesWithoutADeadlineGetTheHorizonLikeSingleFrames) {
  EXPECT_LE(SingleFramesDoneBeforeAnExposureWithoutADeadline(0.01), 5);
  EXPECT_EQ(SingleFramesDoneBeforeAnExposureWithoutADeadline(0), 8);  // the old order
}

}  // namespace
}  // namespace spexd::testing
