// Benchmark: one DESI exposure -- 30 frames (10 petals x 3 arms), every
// camera with its own PSF -- submitted at once to one spexd, timed from the first
// submission to the last frame file written.
//
// Cameras: by default the b0, r0 and z0 PSFs of the reference data's psf/ (or $SPEXD_SHARED_DATA/psf),
// so that the 30 frames are 10 b, 10 r and 10 z. Each frame is simulated on its PSF's CCD
// (NPIX_Y x NPIX_X) and extracted with its arm's DESI grid and psferr
// (core/plan/desi_cameras.h: b 3600-5800 / 0.04, r 5760-7620 / 0.01, z 7520-9824 / 0.01).
//
// PSF stand-ins: each base PSF (--psf, repeatable, replaces the default three) is written again with its
// XTRACE and YTRACE Legendre c0 shifted by whole and half pixels (P0 = 1, so the traces
// move rigidly). Every file is distinct (its own PSF id, geometry and device state) and
// loaded through the normal path. One frame is simulated per base PSF (unshifted); a frame
// extracted with a shifted PSF does the same work per patch, which is what is timed.
//
// Each frame has its own client thread, as pipeline workers do: it loads its PSF by server
// path, extracts by server path, rebuilds the frame from the stream and writes it (the
// spexctl path). Two passes over the same exposure: cold (the PSFs are new to the server)
// and warm (the same PSFs again, if the cache kept them). Memory per PSF comes from
// ListPsfs (host_bytes, gpu_bytes). JSON on stdout, summary on stderr.
//
// --one-job 1: the exposure is submitted as one job instead, as
// `spexctl exposure` does (client::RunExposure: the 30 PSFs loaded by server path, then one
// ExtractExposure call); the server writes every frame into --out-dir, and the pass ends
// with the last frame's result. received_s and write_s are then 0 (nothing is streamed).
//
//   spexd_exposure_bench [--psf PSF.fits]... [--frames 30] [--fibers 500]
//                        [--backend cuda|cpu (cuda)] [--gpus 0,1,...] [--threads T]
//                        [--psf-cache-bytes B] [--passes 2] [--prefetch P (0: spexd's default)] [--streamers S (0)]
//                       [--backends-per-gpu N (0: spexd's default)]
//                        [--out-dir DIR (the frame files; default the bench's temp dir)]
//                        [--one-job 0|1 (0: one client per frame; 1: ExtractExposure)]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/spexctl/remote_exposure.h"
#include "client/spexctl/remote_extract.h"
#include "client/lib/spexd_client.h"
#include "core/cpu/blas_core_type.h"
#include "core/frame/frame_writer.h"
#include "core/io/psf.h"
#include "core/plan/desi_cameras.h"
#include "core/sim/psf_stand_in.h"
#include "core/sim/simulator.h"
#include "proto/convert/extraction_params.h"
#include "server/spexd_server.h"
#include "tests/test_support.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<std::string> psfs;
  int frames = 30;
  int fibers = 500;
  int threads = 0;
  int passes = 2;
  int prefetch = 0;  // frames read and decoded ahead per worker (server --prefetch; 0: its default)
  int streamers = 0;       // server --streamers_per_worker (0: its default)
  int backends_per_gpu = 0;  // server --backends_per_gpu (0: its default)
  std::string out_dir;     // where the frame files are written ("": the bench's temp dir)
  bool one_job = false;    // submit the exposure as one ExtractExposure call
  int64_t psf_cache_bytes = int64_t{64} << 30;  // host bytes; room for an exposure
  std::string backend = "cuda";
  std::vector<int> gpus;
};

absl::StatusOr<Args> Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    int n = 0;
    const bool num = absl::SimpleAtoi(v, &n);
    if (k == "--psf") {
      a.psfs.push_back(v);
    } else if (k == "--backend") {
      a.backend = v;
    } else if (k == "--gpus") {
      for (absl::string_view d : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        int g = 0;
        if (!absl::SimpleAtoi(d, &g)) return absl::InvalidArgumentError("--gpus: bad device");
        a.gpus.push_back(g);
      }
    } else if (k == "--psf-cache-bytes") {
      if (!absl::SimpleAtoi(v, &a.psf_cache_bytes)) return absl::InvalidArgumentError(k);
    } else if (num && k == "--frames") {
      a.frames = std::max(1, n);
    } else if (num && k == "--fibers") {
      a.fibers = std::clamp(n, 25, 500);
    } else if (num && k == "--threads") {
      a.threads = n;
    } else if (num && k == "--prefetch") {
      a.prefetch = std::max(0, n);
    } else if (k == "--out-dir") {
      a.out_dir = v;
    } else if (num && k == "--streamers") {
      a.streamers = std::max(0, n);
    } else if (num && k == "--backends-per-gpu") {
      a.backends_per_gpu = std::max(0, n);
    } else if (num && k == "--one-job") {
      a.one_job = n != 0;
    } else if (num && k == "--passes") {
      a.passes = std::max(1, n);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown or bad flag ", k, " ", v));
    }
  }
  if (a.psfs.empty()) {
    for (const char* name : {"psf/psf-b0-synth.fits", "psf/psf-r0-00051060.fits", "psf/psf-z0-synth.fits"}) {
      const std::string path = spexd::testing::SharedDataPath(name);
      if (path.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "no ", name, " in the reference data (set SPEXD_SHARED_DATA to the data folder, or give "
            "the base PSFs with --psf)"));
      }
      a.psfs.push_back(path);
    }
  }
  return a;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "exposure_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

// A camera's extraction parameters: its arm's DESI grid and psferr, for `fibers` fibres.
struct Camera {
  spexd::core::DesiArm arm;
  spexd::core::ExtractionParams params;
};

absl::StatusOr<Camera> CameraOf(const std::string& psf_path, int fibers) {
  auto psf = spexd::core::Psf::Load(psf_path);
  if (!psf.ok()) return psf.status();
  auto arm = spexd::core::DesiArmForPsf(*psf);
  if (!arm.ok()) return arm.status();
  Camera c;
  c.arm = *arm;
  c.params.nspec = fibers;
  c.params.wmin = arm->wmin;
  c.params.wmax = arm->wmax;
  c.params.dw = arm->dw;
  c.params.psferr = arm->psferr;
  return c;
}

// A preproc frame on the PSF's CCD (NPIX_Y x NPIX_X), lit on the camera's grid.
absl::Status SimulateFrame(const std::string& psf_path, const Camera& camera, int seed,
                           const std::string& out) {
  auto psf = spexd::core::Psf::Load(psf_path);
  if (!psf.ok()) return psf.status();
  spexd::core::SimOptions sim;
  sim.nfibers = camera.params.nspec;
  sim.wmin = camera.params.wmin;
  sim.wmax = camera.params.wmax;
  sim.dw = camera.params.dw;
  sim.seed = seed;
  sim.camera = absl::StrCat(std::string(1, camera.arm.arm), "0");
  auto spectra = spexd::core::GenerateSpectra(sim);
  if (!spectra.ok()) return spectra.status();
  auto frame = spexd::core::SimulateFrame(*psf, *spectra, sim);
  if (!frame.ok()) return frame.status();
  return spexd::core::WritePreproc(out, *psf, *spectra, *frame, sim);
}

struct FrameRun {
  absl::Status status = absl::UnknownError("not run");
  double done_s = 0;  // since the first submission, after the file is written
  double load_s = 0, queue_s = 0, extract_s = 0;
  double received_s = 0;  // since the first submission, when the last spectra arrived
  double write_s = 0;     // FITS encoding and the atomic (fsync'd) write
  std::string backend;
};

struct Pass {
  double exposure_s = 0;
  std::vector<FrameRun> frames;
};

// One exposure: every frame submitted at once from its own thread.
Pass RunExposure(const std::string& target, const std::vector<std::string>& psf_paths,
                 const std::vector<std::string>& frame_paths, const std::string& out_prefix,
                 const std::vector<spexd::core::ExtractionParams>& params) {
  Pass p;
  const int n = static_cast<int>(psf_paths.size());
  p.frames.resize(static_cast<std::size_t>(n));
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      using namespace spexd::client;
      FrameRun& r = p.frames[static_cast<std::size_t>(i)];
      ExtractCommand cmd;
      cmd.input = frame_paths[static_cast<std::size_t>(i)];
      cmd.psf = psf_paths[static_cast<std::size_t>(i)];
      cmd.output = absl::StrCat(out_prefix, i, ".fits");
      cmd.params = params[static_cast<std::size_t>(i)];
      cmd.quiet = true;
      RemoteExtractOptions o;
      o.client.target = target;
      o.server_paths = true;
      o.priority = spexd::v1::REALTIME;
      auto client = SpexdClient::Create(o.client);
      if (!client.ok()) {
        r.status = client.status();
        return;
      }
      auto result = ExtractRemote(**client, cmd, o);
      if (!result.ok()) {
        r.status = result.status();
        return;
      }
      r.received_s = Seconds(t0, Clock::now());
      auto bytes = spexd::core::FrameToFits(result->frame, result->meta);
      r.status = bytes.ok() ? spexd::core::WriteFitsAtomically(cmd.output, *bytes) : bytes.status();
      r.done_s = Seconds(t0, Clock::now());
      r.write_s = r.done_s - r.received_s;
      r.load_s = result->summary.load_seconds();
      r.queue_s = result->summary.queue_seconds();
      r.extract_s = result->summary.extract_seconds();
      r.backend = result->header.backend();
    });
  }
  for (auto& t : threads) t.join();
  p.exposure_s = Seconds(t0, Clock::now());
  return p;
}

// One exposure as one job: the frames' PSFs loaded and the whole exposure submitted in one
// ExtractExposure call (client::RunExposure, as `spexctl exposure`), the server writing
// each frame file. Timed from the first PSF load to the last frame's result.
Pass RunExposureAsOneJob(const std::string& target, const std::vector<std::string>& psf_paths,
                         const std::vector<std::string>& frame_paths, const std::string& out_prefix,
                         const std::vector<spexd::core::ExtractionParams>& params) {
  Pass p;
  const int n = static_cast<int>(psf_paths.size());
  p.frames.resize(static_cast<std::size_t>(n));
  std::vector<spexd::client::ExposureEntry> entries;
  for (int i = 0; i < n; ++i) {
    spexd::client::ExtractCommand cmd;  // `spexctl extract` with -n, -w and --psferr
    cmd.params = params[static_cast<std::size_t>(i)];
    const std::string out = absl::StrCat(out_prefix, i, ".fits");
    std::remove(out.c_str());
    spexd::client::ExposureEntry e;
    e.psf = psf_paths[static_cast<std::size_t>(i)];
    e.header.set_server_path(frame_paths[static_cast<std::size_t>(i)]);
    e.header.set_server_output_path(out);
    // As `spexctl exposure` asks (its lines show no checksum): CRC-32, not SHA-256.
    e.header.set_output_checksum(spexd::v1::FILE_CHECKSUM_CRC32);
    *e.header.mutable_params() = spexd::wire::ParamsToProto(cmd.params);
    e.header.set_in_img_name(frame_paths[static_cast<std::size_t>(i)]);
    e.header.set_in_psf_name(e.psf);
    entries.push_back(std::move(e));
  }
  spexd::client::ClientOptions co;
  co.target = target;
  auto client = spexd::client::SpexdClient::Create(co);
  if (!client.ok()) {
    for (FrameRun& r : p.frames) r.status = client.status();
    return p;
  }
  spexd::client::ExposureOptions options;
  options.priority = spexd::v1::REALTIME;
  options.tag = "exposure_bench";
  const auto t0 = Clock::now();
  auto outcome = spexd::client::RunExposure(
      **client, std::move(entries), options, [&](const spexd::v1::ExposureFrameResult& r) {
        FrameRun& f = p.frames[static_cast<std::size_t>(r.index())];
        f.done_s = Seconds(t0, Clock::now());
        f.status = r.code() == 0 ? absl::OkStatus()
                                 : absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
        f.load_s = r.summary().load_seconds();
        f.queue_s = r.summary().queue_seconds();
        f.extract_s = r.summary().extract_seconds();
        f.received_s = 0;
        f.write_s = 0;
        f.backend = "server-written";
      });
  p.exposure_s = Seconds(t0, Clock::now());
  if (!outcome.ok()) {
    for (FrameRun& r : p.frames) {
      if (r.status.ok() || absl::IsUnknown(r.status)) r.status = outcome.status();
    }
  }
  return p;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string PassJson(const Pass& p) {
  std::vector<double> load, queue, extract, received, write;
  for (const FrameRun& f : p.frames) {
    load.push_back(f.load_s);
    queue.push_back(f.queue_s);
    extract.push_back(f.extract_s);
    received.push_back(f.received_s);
    write.push_back(f.write_s);
  }
  return absl::StrFormat(
      "{\"exposure_s\": %.4f, \"median_load_s\": %.4f, \"max_load_s\": %.4f, "
      "\"median_queue_s\": %.4f, \"median_extract_s\": %.4f, \"max_extract_s\": %.4f, "
      "\"last_received_s\": %.4f, \"median_write_s\": %.4f, \"max_write_s\": %.4f}",
      p.exposure_s, Median(load), *std::max_element(load.begin(), load.end()), Median(queue),
      Median(extract), *std::max_element(extract.begin(), extract.end()),
      *std::max_element(received.begin(), received.end()), Median(write),
      *std::max_element(write.begin(), write.end()));
}

std::string WorkersText(const absl::StatusOr<spexd::v1::ServerInfo>& info) {
  if (!info.ok()) return "?";
  std::string text;
  for (const auto& w : info->workers()) {
    absl::StrAppend(&text, text.empty() ? "" : "; ", w.description());
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);  // as spexd does (blas_core_type.h)
  using namespace spexd;
  auto parsed = Parse(argc, argv);
  if (!parsed.ok()) return Fail("flags", parsed.status());
  const Args& args = *parsed;
  const std::string dir = testing::MakeTempDir();

  // --- Inputs: one frame per base PSF, and `frames` distinct PSF files.
  const int nbase = static_cast<int>(args.psfs.size());
  std::vector<std::string> base_frames;
  std::vector<Camera> cameras;
  std::string arms;
  for (int b = 0; b < nbase; ++b) {
    auto camera = CameraOf(args.psfs[static_cast<std::size_t>(b)], args.fibers);
    if (!camera.ok()) return Fail("camera", camera.status());
    cameras.push_back(*camera);
    arms.push_back(camera->arm.arm);
    base_frames.push_back(absl::StrCat(dir, "/preproc-", b, ".fits"));
    if (absl::Status st = SimulateFrame(args.psfs[static_cast<std::size_t>(b)], *camera, 11 + b,
                                        base_frames.back());
        !st.ok()) {
      return Fail("simulate", st);
    }
  }
  std::vector<std::string> psf_paths, frame_paths;
  std::vector<spexd::core::ExtractionParams> params;
  for (int i = 0; i < args.frames; ++i) {
    const int b = i % nbase;
    const int k = i / nbase;  // shifts: (0,0), (0.5,0), (0,0.5), (1,0), (0,1), (1.5,0), ...
    const double step = 0.5 * ((k + 1) / 2);
    const double dx = k % 2 == 1 ? step : 0.0, dy = k % 2 == 0 ? step : 0.0;
    psf_paths.push_back(absl::StrCat(dir, "/psf-", i, ".fits"));
    if (absl::Status st = spexd::core::WriteShiftedPsf(args.psfs[static_cast<std::size_t>(b)], psf_paths.back(), dx, dy);
        !st.ok()) {
      return Fail("psf stand-in", st);
    }
    frame_paths.push_back(base_frames[static_cast<std::size_t>(b)]);
    params.push_back(cameras[static_cast<std::size_t>(b)].params);
  }

  // --- One spexd: one worker per GPU (all, or --gpus), or the CPU backend.
  server::ServerOptions so;
  so.network.listen = "127.0.0.1:0";
  so.network.metrics_listen.clear();
  so.storage.data_roots = {dir};
  so.storage.output_roots = {dir};
  if (!args.out_dir.empty()) so.storage.output_roots.push_back(args.out_dir);
  auto kind = core::ParseBackendKind(args.backend);
  if (!kind.ok()) return Fail("--backend", kind.status());
  so.workers.backend = *kind;
  so.workers.gpu_devices = args.gpus;
  so.workers.cpu_threads = args.threads;
  so.storage.psf_cache_bytes = args.psf_cache_bytes;
  so.scheduling.max_queue = args.frames;
  so.scheduling.prefetch = args.prefetch;
  so.scheduling.streamers_per_worker = args.streamers;
  so.workers.backends_per_gpu = args.backends_per_gpu;
  // As spexd's main: another build's module for an A/B (cuda/host/diagnostics.h).
  if (const char* module = std::getenv("SPEXD_CUDA_MODULE")) so.workers.cuda_module = module;
  auto srv = server::SpexdServer::Start(so);
  if (!srv.ok()) return Fail("server", srv.status());
  if (absl::Status st = (*srv)->WaitForWarmUp(absl::Seconds(120)); !st.ok()) return Fail("warm-up", st);
  const std::string target = absl::StrCat("127.0.0.1:", (*srv)->port());

  std::vector<Pass> passes;
  for (int p = 0; p < args.passes; ++p) {
    const std::string out_dir = args.out_dir.empty() ? dir : args.out_dir;
    const std::string prefix = absl::StrCat(out_dir, "/frame-", p, "-");
    passes.push_back(args.one_job ? RunExposureAsOneJob(target, psf_paths, frame_paths, prefix, params)
                                  : RunExposure(target, psf_paths, frame_paths, prefix, params));
    for (const FrameRun& f : passes.back().frames) {
      if (!f.status.ok()) return Fail(absl::StrCat("pass ", p), f.status);
    }
    std::fprintf(stderr, "exposure_bench: pass %d (%s): %d frames in %.3f s\n", p,
                 p == 0 ? "cold" : "again", args.frames, passes.back().exposure_s);
  }

  // --- Memory each PSF holds, as the server reports it.
  client::ClientOptions co;
  co.target = target;
  auto cli = client::SpexdClient::Create(co);
  if (!cli.ok()) return Fail("client", cli.status());
  auto listed = (*cli)->ListPsfs();
  if (!listed.ok()) return Fail("list psfs", listed.status());
  auto info = (*cli)->GetServerInfo();
  std::vector<double> gpu_bytes, host_bytes;
  int geometries = 0;
  for (const auto& psf : listed->psfs()) {
    gpu_bytes.push_back(static_cast<double>(psf.gpu_bytes()));
    host_bytes.push_back(static_cast<double>(psf.host_bytes()));
    geometries += psf.geometries();
  }
  double gpu_total = 0;
  for (double b : gpu_bytes) gpu_total += b;

  std::string json = absl::StrFormat(
      "{\"bench\": \"exposure\", \"one_job\": %s, \"frames\": %d, \"fibers\": %d, \"base_psfs\": %d, \"arms\": \"%s\", \"prefetch\": %d, "
      "\"gpus\": [%s], "
      "\"backend\": \"%s\", \"server\": \"%s\", \"psfs_loaded_after\": %d, "
      "\"geometries_after\": %d, \"median_gpu_bytes_per_psf\": %.0f, "
      "\"median_host_bytes_per_psf\": %.0f, \"gpu_bytes_all_psfs\": %.0f, \"passes\": [",
      args.one_job ? "true" : "false", args.frames, args.fibers, nbase, arms, args.prefetch, absl::StrJoin(args.gpus, ", "),
      passes[0].frames[0].backend,
      WorkersText(info), listed->psfs_size(), geometries,
      Median(gpu_bytes), Median(host_bytes), gpu_total);
  for (std::size_t p = 0; p < passes.size(); ++p) {
    absl::StrAppend(&json, p > 0 ? ", " : "", PassJson(passes[p]));
  }
  absl::StrAppend(&json, "]}");
  std::printf("%s\n", json.c_str());
  (*srv)->Drain(absl::Seconds(10));
  return 0;
}
