// Benchmark: what the service adds to an extraction. A simulated frame on disk (path
// input) is extracted (a) by the backend alone (Backend::Extract on the decoded image,
// warm geometry, a sink that drops the bundles), (a') by core::ExtractFrame (the same plus
// the host-side finalisation and frame assembly a local run does), (b) locally as
// `spexctl extract --local` would, minus the file write (read + decode + ExtractFrame),
// and (c) through an in-process spexd over loopback gRPC: server-side read and
// decode, extraction, every bundle streamed, and the client's frame rebuild (specmask
// included) -- one frame at a time (latency), then with K clients each sending frames
// back to back (throughput: the server decodes the next frame while the worker extracts).
// Inputs are built before any clock starts; each path is warmed up once; medians and p90
// of R repetitions go to stdout as JSON (summary on stderr).
//
// (d) Production clients run on other machines, not in the server's process: with
// --client-procs K the benchmark also starts K client processes (this binary in client
// mode), each sending --proc-frames frames back to back to the in-process server and
// rebuilding every frame (specmask included) as spexctl does, minus the file write. They
// still share this machine's cores with the server.
//
// With the CUDA backend the server runs one worker per GPU (all visible, or --gpus; the
// backend alone and the local run use the first of --gpus). The JSON's "gpu_work" gives
// each GPU's frames and busy seconds from spexd's per-worker metrics, over the whole
// service run and during the client processes alone ("procs_frames", "procs_busy_s").
//
// Frames in flight are reported two ways: wall time / frames (includes filling and
// draining the pipeline: the first frame's read and decode before any extraction, the
// last one's streaming after it), and the steady-state interval, (last completion -
// first completion) / (frames - 1), which is what a kept-busy service costs per frame.
//
//   spexd_rpc_bench [--fibers N (500)] [--repeats R (3)] [--threads T] [--backend cpu|cuda]
//                   [--inflight K (2; 0 skips)] [--prefetch P (0: spexd's default)] [--streamers S (0)] [--psf PSF.fits (bundled)]
//                   [--client-procs K (0)] [--proc-frames F (repeats)] [--gzip 1 (input as .fits.gz)]
//                   [--gpus 0,1,... (spexd's --gpu_devices; default all visible)]
//                   [--shadow-parity-fraction F (spexd's --shadow_parity_fraction; default its
//                    0.01)] [--shadow-parity-threads N (its --shadow_parity_threads)]
//                   (served throughput at F = 0 against 0.01; the JSON's
//                    "shadow_parity" counts the checks by result)
//                   [--frame PATH (the simulated frame: written there when absent, reused
//                    when present, so that alternating runs share one input; its directory
//                    is the server's data root)]
//   client mode:    --client-only 1 --target HOST:PORT --psf-id ID --frame PATH --fibers N
//                   --frames F    (prints "frame <completion, steady clock s> <wall s>
//                   <server extract s> <server load s>" per frame)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/lib/spexd_client.h"
#include "core/backend/backend.h"
#include "core/backend/extract_frame.h"
#include "core/plan/geometry.h"
#include "core/io/internal/gzip.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/sim/simulator.h"
#include "core/base/status_macros.h"
#include "core/cpu/blas_core_type.h"
#include "server/platform/metrics.h"
#include "server/spexd_server.h"
#include "tests/bench/rpc_bench_clients.h"
#include "tests/bench/rpc_bench_metrics.h"
#include "tests/test_support.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace spexd::bench;  // NOLINT: the bench's own helpers (rpc_bench_clients.h)

struct Args {
  int fibers = 500;
  int repeats = 3;
  int threads = 0;
  int inflight = 2;
  int prefetch = 0;
  int streamers = 0;       // spexd --streamers_per_worker (0: its default)
  std::string backend = "cpu";
  std::string psf = spexd::testing::BundledPsfPath();
  int client_procs = 0;
  int proc_frames = 0;  // 0: repeats
  bool gzip = false;     // the frame as .fits.gz (DESI's compressed preproc files)
  std::vector<int> gpus;  // the server's workers (--gpu_devices); empty: all visible
  std::string bad_gpus;   // a --gpus entry that is not a device ordinal
  double shadow_fraction = -1;  // spexd --shadow_parity_fraction; < 0: its default
  int shadow_threads = 0;       // spexd --shadow_parity_threads; 0: its default
  // Client mode.
  bool client_only = false;
  std::string target, psf_id, frame;
  int frames = 1;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--fibers") a.fibers = v;
    if (k == "--repeats") a.repeats = std::max(1, v);
    if (k == "--threads") a.threads = v;
    if (k == "--inflight") a.inflight = std::max(0, v);
    if (k == "--prefetch") a.prefetch = std::max(0, v);
    if (k == "--streamers") a.streamers = std::max(0, v);
    if (k == "--backend") a.backend = argv[i + 1];
    if (k == "--psf") a.psf = argv[i + 1];
    if (k == "--client-procs") a.client_procs = std::max(0, v);
    if (k == "--proc-frames") a.proc_frames = std::max(0, v);
    if (k == "--client-only") a.client_only = v != 0;
    if (k == "--target") a.target = argv[i + 1];
    if (k == "--psf-id") a.psf_id = argv[i + 1];
    if (k == "--frame") a.frame = argv[i + 1];
    if (k == "--frames") a.frames = std::max(1, v);
    if (k == "--gzip") a.gzip = v != 0;
    if (k == "--shadow-parity-fraction") a.shadow_fraction = std::atof(argv[i + 1]);
    if (k == "--shadow-parity-threads") a.shadow_threads = std::max(0, v);
    if (k == "--gpus") {
      for (absl::string_view d : absl::StrSplit(argv[i + 1], ',', absl::SkipEmpty())) {
        int g = 0;
        if (!absl::SimpleAtoi(d, &g) || g < 0) a.bad_gpus = std::string(d);
        a.gpus.push_back(g);
      }
    }
  }
  if (a.proc_frames == 0) a.proc_frames = a.repeats;
  return a;
}

// (a), (a'), (b): the backend alone, ExtractFrame, and a local read + ExtractFrame.
struct LocalTimes {
  std::vector<double> backend_s, frame_s, local_s, read_s;
  std::map<std::string, std::vector<double>> alone_stages;  // backend stage seconds
  int nwave = 0;
};

absl::StatusOr<LocalTimes> TimeLocal(const Args& args, const std::shared_ptr<const spexd::core::Psf>& psf,
                                     const spexd::core::ExtractionParams& params,
                                     const std::string& frame_path, spexd::core::BackendKind kind) {
  namespace core = spexd::core;
  core::BackendOptions bopts;
  bopts.kind = kind;
  bopts.threads = args.threads;
  if (kind == core::BackendKind::kCuda && !args.gpus.empty()) bopts.device = args.gpus.front();
  if (const char* module = std::getenv("SPEXD_CUDA_MODULE")) bopts.cuda_module = module;
  SPEXD_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> backend, core::CreateBackend(bopts));
  LocalTimes t;
  std::shared_ptr<const core::Geometry> geometry;
  // Decoded as spexd decodes: planes in parallel, float32 kept for a backend that takes it.
  core::TaskPool decode_pool;
  decode_pool.AddThreads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()) - 1));
  core::PlaneBufferPool buffers(int64_t{1} << 30);
  core::PreprocOptions popts;
  popts.pool = &decode_pool;
  popts.buffers = &buffers;
  popts.keep_float32 = core::TakesFloat32Planes(*backend);
  popts.keep_raw = core::TakesRawPlanes(*backend);
  if (popts.keep_float32 && backend->gpu() != nullptr) {
    buffers.set_pinner(backend->gpu()->PlanePinner());  // as spexd
  }
  for (int r = -1; r < args.repeats; ++r) {  // r = -1: warm-up (spots evaluated and kept)
    const auto t0 = Clock::now();
    SPEXD_ASSIGN_OR_RETURN(core::PreprocImage image, core::ReadPreproc(frame_path, popts));
    const double read = Since(t0);
    if (geometry == nullptr) {
      SPEXD_ASSIGN_OR_RETURN(geometry,
                             core::Geometry::Create(psf, params, image.height, image.width, true));
    }
    core::ExtractionJob job;
    job.geometry = geometry;
    job.image = &image;
    job.psferr = core::EffectivePsfErr(params, *psf);
    const auto t1 = Clock::now();
    SPEXD_RETURN_IF_ERROR(core::ExtractFrame(*backend, job).status());
    const double whole = Since(t1);
    const auto t2 = Clock::now();
    SPEXD_ASSIGN_OR_RETURN(core::ExtractionSummary extracted,
                           backend->Extract(job, [](core::BundleResult&&) { return absl::OkStatus(); }));
    if (r >= 0) {
      for (const auto& [stage, secs] : extracted.stage_seconds) t.alone_stages[stage].push_back(secs);
      t.backend_s.push_back(Since(t2));
      t.frame_s.push_back(whole);
      t.local_s.push_back(read + whole);
      t.read_s.push_back(read);
    }
  }
  t.nwave = geometry->plan().nwave;
  return t;
}

// (c) through the service: one frame at a time, then K clients back to back.
struct ServiceTimes {
  std::vector<double> service_s, server_read_s, server_extract_s;
  double per_frame_inflight = 0, steady_inflight = 0;
  std::vector<double> tp_load, tp_extract, tp_queue;
};

absl::StatusOr<ServiceTimes> TimeService(const Args& args, const spexd::client::ClientOptions& co,
                                         const spexd::v1::ExtractHeader& header) {
  namespace client = spexd::client;
  namespace v1 = spexd::v1;
  SPEXD_ASSIGN_OR_RETURN(std::unique_ptr<client::SpexdClient> cli, client::SpexdClient::Create(co));
  ServiceTimes t;
  for (int r = -1; r < args.repeats; ++r) {
    v1::ExtractSummary summary;
    const auto t0 = Clock::now();
    SPEXD_RETURN_IF_ERROR(RemoteFrame(*cli, header, &summary));
    if (r >= 0) {
      t.service_s.push_back(Since(t0));
      t.server_read_s.push_back(summary.load_seconds());
      t.server_extract_s.push_back(summary.extract_seconds());
    }
  }
  // Throughput: K clients, each sending `repeats` frames back to back.
  std::vector<std::unique_ptr<client::SpexdClient>> clients;
  for (int k = 0; k < args.inflight; ++k) {
    SPEXD_ASSIGN_OR_RETURN(std::unique_ptr<client::SpexdClient> c, client::SpexdClient::Create(co));
    clients.push_back(std::move(c));
  }
  std::vector<absl::Status> results(args.inflight);
  std::vector<std::vector<v1::ExtractSummary>> summaries(args.inflight);
  std::vector<std::vector<double>> done_at(args.inflight);
  const auto tp0 = Clock::now();
  {
    std::vector<std::thread> threads;
    for (int k = 0; k < args.inflight; ++k) {
      threads.emplace_back([&, k] {
        for (int r = 0; r < args.repeats && results[k].ok(); ++r) {
          v1::ExtractSummary summary;
          results[k] = RemoteFrame(*clients[k], header, &summary);
          summaries[k].push_back(summary);
          done_at[k].push_back(SteadyNow());
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  std::vector<double> done_all;
  for (const auto& d : done_at) done_all.insert(done_all.end(), d.begin(), d.end());
  t.steady_inflight = SteadyInterval(done_all);
  for (const auto& list : summaries) {
    for (const auto& sm : list) {
      t.tp_load.push_back(sm.load_seconds());
      t.tp_extract.push_back(sm.extract_seconds());
      t.tp_queue.push_back(sm.queue_seconds());
    }
  }
  t.per_frame_inflight = args.inflight > 0 ? Since(tp0) / (args.inflight * args.repeats) : 0;
  for (const absl::Status& st : results) SPEXD_RETURN_IF_ERROR(st);
  return t;
}

double MedianOr0(const std::vector<double>& v) { return v.empty() ? 0.0 : Summarise(v).median; }

void PrintJson(const Args& args, const LocalTimes& lt, const ServiceTimes& st, const ProcResult& procs,
               const GpuWorkMap& gpu_work, const std::string& shadow_json) {
  const Stats b = Summarise(lt.backend_s), l = Summarise(lt.local_s), s = Summarise(st.service_s);
  const Stats fr = Summarise(lt.frame_s);
  const Stats rd = Summarise(lt.read_s), srd = Summarise(st.server_read_s),
              sx = Summarise(st.server_extract_s);
  const double procs_frames = static_cast<double>(procs.done.size());
  const double procs_wall = procs_frames > 0 ? (procs.end - procs.start) / procs_frames : 0;
  const double procs_steady = SteadyInterval(procs.done);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::printf(
      "{\"bench\":\"rpc\",\"fibers\":%d,\"nwave\":%d,\"repeats\":%d,\"cpu\":\"%s\",\"cores\":%ld,"
      "\"host\":\"%s\",\"backend_s\":{\"median\":%.3f,\"p90\":%.3f},\"extract_frame_s\":{\"median\":%.3f},"
      "\"local_s\":{\"median\":%.3f,"
      "\"p90\":%.3f},\"read_s\":{\"median\":%.3f},\"service_s\":{\"median\":%.3f,\"p90\":%.3f},"
      "\"server_load_s\":{\"median\":%.3f},\"server_extract_s\":{\"median\":%.3f},"
      "\"overhead_vs_backend\":%.4f,\"overhead_vs_local\":%.4f,\"backend\":\"%s\","
      "\"inflight\":%d,\"service_per_frame_inflight_s\":%.4f,\"throughput_overhead_vs_backend\":%.4f,"
      "\"steady_per_frame_inflight_s\":%.4f,\"steady_overhead_vs_backend\":%.4f,"
      "\"client_procs\":%d,\"proc_frames\":%d,\"procs_wall_per_frame_s\":%.4f,"
      "\"procs_wall_overhead_vs_backend\":%.4f,\"procs_steady_per_frame_s\":%.4f,"
      "\"procs_steady_overhead_vs_backend\":%.4f,\"procs_server_extract_s\":{\"median\":%.4f},"
      "\"procs_server_load_s\":{\"median\":%.4f},\"prefetch\":%d,\"gzip\":%s,\"gpus\":[%s],"
      "\"gpu_work\":%s,\"shadow_parity\":%s,\"git_sha\":\"%s\"}\n",
      args.fibers, lt.nwave, args.repeats, CpuModel().c_str(), sysconf(_SC_NPROCESSORS_ONLN), host,
      b.median, b.p90, fr.median, l.median, l.p90, rd.median, s.median, s.p90, srd.median,
      sx.median, s.median / b.median - 1, s.median / l.median - 1, args.backend.c_str(),
      args.inflight, st.per_frame_inflight, st.per_frame_inflight / b.median - 1,
      st.steady_inflight, st.steady_inflight / b.median - 1, args.client_procs, args.proc_frames,
      procs_wall, procs_wall / b.median - 1, procs_steady, procs_steady / b.median - 1,
      MedianOr0(procs.extract), MedianOr0(procs.load), args.prefetch,
      args.gzip ? "true" : "false", absl::StrJoin(args.gpus, ",").c_str(),
      GpuWorkJson(gpu_work).c_str(), shadow_json.c_str(), GitSha().c_str());
}

void PrintSummary(const Args& args, const LocalTimes& lt, const ServiceTimes& st,
                  const ProcResult& procs, const GpuWorkMap& gpu_work) {
  const Stats b = Summarise(lt.backend_s), l = Summarise(lt.local_s), s = Summarise(st.service_s);
  const Stats fr = Summarise(lt.frame_s);
  const Stats rd = Summarise(lt.read_s), srd = Summarise(st.server_read_s),
              sx = Summarise(st.server_extract_s);
  std::fprintf(stderr,
               "rpc_bench: %d fibres, %s: backend %.3f s (ExtractFrame %.3f s), local (read %.3f + "
               "ExtractFrame) %.3f s, "
               "service %.3f s (server load %.3f, extract %.3f) -> %+.1f%% vs backend, %+.1f%% vs "
               "local; %d in flight (prefetch %d): %.3f s per frame -> %+.1f%% vs backend (server "
               "load %.3f, extract %.3f, queue %.3f s)\n",
               args.fibers, args.backend.c_str(), b.median, fr.median, rd.median, l.median, s.median,
               srd.median, sx.median, 100 * (s.median / b.median - 1),
               100 * (s.median / l.median - 1), args.inflight, args.prefetch, st.per_frame_inflight,
               100 * (st.per_frame_inflight / b.median - 1), MedianOr0(st.tp_load),
               MedianOr0(st.tp_extract), MedianOr0(st.tp_queue));
  if (args.inflight > 0) {
    std::fprintf(stderr, "rpc_bench: %d in flight, steady state: %.4f s per frame -> %+.1f%% vs backend\n",
                 args.inflight, st.steady_inflight, 100 * (st.steady_inflight / b.median - 1));
  }
  if (args.client_procs > 0) {
    // Where the extraction's extra time under load goes: backend stages, alone vs served.
    std::string stages;
    for (const auto& [stage, alone] : lt.alone_stages) {
      auto it = procs.stages.find(stage);
      if (it == procs.stages.end()) continue;
      stages += absl::StrCat(" ", stage, " ", absl::StrFormat("%.1f", 1e3 * Summarise(alone).median),
                             "->", absl::StrFormat("%.1f", 1e3 * Summarise(it->second).median));
    }
    const double procs_frames = static_cast<double>(procs.done.size());
    const double procs_wall = procs_frames > 0 ? (procs.end - procs.start) / procs_frames : 0;
    const double procs_steady = SteadyInterval(procs.done);
    std::fprintf(stderr, "rpc_bench: backend stages, ms median (alone->served):%s\n", stages.c_str());
    std::fprintf(stderr,
                 "rpc_bench: %d client processes x %d frames: wall %.4f s per frame -> %+.1f%% vs "
                 "backend; steady state %.4f s per frame -> %+.1f%% vs backend (server extract "
                 "%.4f, load %.4f s)\n",
                 args.client_procs, args.proc_frames, procs_wall, 100 * (procs_wall / b.median - 1),
                 procs_steady, 100 * (procs_steady / b.median - 1), MedianOr0(procs.extract),
                 MedianOr0(procs.load));
  }
  std::string per_gpu;
  for (const auto& [gpu, g] : gpu_work) {
    absl::StrAppend(&per_gpu, " gpu ", gpu, ": ", g.frames, " frames (", g.procs_frames,
                    " from the client processes), busy ", absl::StrFormat("%.2f", g.busy_s), " s;");
  }
  std::fprintf(stderr, "rpc_bench: work by GPU (spexd_worker_* metrics):%s\n", per_gpu.c_str());
}

// The simulated r frame on disk (seed 11), inside the server's data root.
absl::Status WriteSimulatedFrame(const spexd::core::Psf& psf, int fibers, const std::string& path) {
  namespace core = spexd::core;
  core::SimOptions sim;
  sim.nfibers = fibers;
  sim.seed = 11;
  SPEXD_ASSIGN_OR_RETURN(core::SimSpectra spectra, core::GenerateSpectra(sim));
  SPEXD_ASSIGN_OR_RETURN(core::SimFrame frame, core::SimulateFrame(psf, spectra, sim));
  return core::WritePreproc(path, psf, spectra, frame, sim);
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);  // as spexd does (blas_core_type.h)
  using namespace spexd;
  const Args args = Parse(argc, argv);
  if (args.client_only) return RunClient(args.target, args.psf_id, args.frame, args.fibers, args.frames);
  if (!args.bad_gpus.empty()) {
    return Fail("--gpus", absl::InvalidArgumentError("bad device '" + args.bad_gpus + "'"));
  }
  const std::string psf_path = args.psf;
  auto psf_value = core::Psf::Load(psf_path);
  if (!psf_value.ok()) return Fail("psf", psf_value.status());
  auto psf = std::make_shared<const core::Psf>(*std::move(psf_value));

  // Inputs before any clock starts.
  std::string dir = testing::MakeTempDir();
  std::string plain_path = dir + "/preproc.fits";
  if (!args.frame.empty()) {  // a frame of an earlier run, or written here for the next ones
    const std::size_t slash = args.frame.rfind('/');
    dir = slash == std::string::npos ? "." : args.frame.substr(0, slash);
    const std::string name = slash == std::string::npos ? args.frame : args.frame.substr(slash + 1);
    if (char* abs = realpath(dir.c_str(), nullptr); abs != nullptr) {  // data roots are absolute
      dir = abs;
      std::free(abs);
    }
    plain_path = dir + "/" + name;
  }
  if (args.frame.empty() || access(plain_path.c_str(), R_OK) != 0) {
    if (absl::Status st = WriteSimulatedFrame(*psf, args.fibers, plain_path); !st.ok()) {
      return Fail("simulated frame", st);
    }
  }
  std::string frame_path = plain_path;
  if (args.gzip) {
    auto gz = core::GzipCompress(testing::ReadBytes(plain_path));
    if (!gz.ok()) return Fail("gzip", gz.status());
    frame_path = plain_path + ".gz";
    if (!testing::WriteBytes(frame_path, *gz)) {
      return Fail("gzip", absl::InternalError("cannot write " + frame_path));
    }
  }
  core::ExtractionParams params;  // r grid 5760-7620, 0.8 (desi_proc's r camera)
  params.nspec = args.fibers;
  absl::StatusOr<core::BackendKind> kind = core::ParseBackendKind(args.backend);
  if (!kind.ok()) return Fail("--backend", kind.status());
  auto local = TimeLocal(args, psf, params, frame_path, *kind);
  if (!local.ok()) return Fail("local extraction", local.status());

  // An in-process spexd with the frame's directory as its data root.
  server::ServerOptions so;
  so.network.listen = "127.0.0.1:0";
  so.network.metrics_listen.clear();
  so.storage.data_roots = {dir};
  so.workers.backend = *kind;
  so.workers.cpu_threads = args.threads;
  so.scheduling.prefetch = args.prefetch;
  so.scheduling.streamers_per_worker = args.streamers;
  so.workers.gpu_devices = args.gpus;
  if (args.shadow_fraction >= 0) so.shadow_parity.fraction = args.shadow_fraction;
  if (args.shadow_threads > 0) so.shadow_parity.threads = args.shadow_threads;
  auto srv = server::SpexdServer::Start(so);
  if (!srv.ok()) return Fail("server", srv.status());
  if (absl::Status st = (*srv)->WaitForWarmUp(absl::Seconds(60)); !st.ok()) return Fail("warm-up", st);
  client::ClientOptions co;
  co.target = absl::StrCat("127.0.0.1:", (*srv)->port());
  auto cli = client::SpexdClient::Create(co);
  if (!cli.ok()) return Fail("client", cli.status());
  auto psf_info = (*cli)->LoadPsfFromServerPath(psf_path);
  if (!psf_info.ok()) {  // the PSF is outside the data root: upload it instead
    psf_info = (*cli)->LoadPsfFromBytes(testing::ReadBytes(psf_path), psf_path);
  }
  if (!psf_info.ok()) return Fail("load psf", psf_info.status());
  const v1::ExtractHeader header = MakeHeader(psf_info->id(), frame_path, args.fibers);
  auto service = TimeService(args, co, header);
  if (!service.ok()) return Fail("remote extract", service.status());
  // (d) Clients in their own processes.
  ProcResult procs;
  GpuWorkMap gpu_work;
  AddTotals((*srv)->metrics().WorkerTotals(), -1, /*procs=*/true, &gpu_work);
  if (args.client_procs > 0) {
    procs = RunClientProcesses(args.client_procs, args.proc_frames, args.fibers, co.target,
                               psf_info->id(), frame_path, dir);
    if (!procs.status.ok()) return Fail("client processes", procs.status);
  }
  (*srv)->Drain(absl::Seconds(5));  // every worker idle: its busy time is counted
  const auto totals = (*srv)->metrics().WorkerTotals();
  AddTotals(totals, 1, /*procs=*/true, &gpu_work);
  AddTotals(totals, 1, /*procs=*/false, &gpu_work);
  const std::string shadow_json =
      ShadowParityJson(so.shadow_parity.fraction, (*srv)->metrics().Serialize());
  PrintJson(args, *local, *service, procs, gpu_work, shadow_json);
  PrintSummary(args, *local, *service, procs, gpu_work);
  std::fprintf(stderr, "rpc_bench: shadow parity %s\n", shadow_json.c_str());
  return 0;
}
