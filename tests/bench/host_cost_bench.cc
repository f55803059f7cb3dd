// Benchmark: the host's CPU cost of a served frame, in CPU-seconds per frame (user + system
// time, not wall time), for spexd and for its clients, and where spexd's part goes.
//
// An in-process spexd serves `spexctl` processes (the real client binary), each extracting
// --frames full frames one after another by server path, --clients of them at once, in
// every served mode:
//   <in>_to_<writer>_<out>: input .fits or .fits.gz (in: fits, fitsgz); the frame file
//   written by the client (spexctl -o) or by spexd (--server-output-path), as .fits or
//   .fits.gz (out: fits, fitsgz);
//   exposure_<kind>: one `spexctl exposure` job (ExtractExposure) of the --arm frames,
//   each --petals times, server-written (kind fitsgz: .fits.gz in and out; fits: .fits).
// Each mode is warmed up first (untimed: one frame, or one pass of the exposure job).
//
// CPU time: spexd's is this process's (getrusage RUSAGE_SELF: the client lanes here only
// wait for their processes), the clients' is their children's (RUSAGE_CHILDREN). spexd's
// part is split by thread role (/proc/self/task/*/stat; the names spexd gives its threads,
// digits dropped): spexd-load (read and decode a preproc), spexd-worker (the backend's host
// side, finalise, assemble, server-side writes' serial part), spexd-host (the shared pool:
// parallel decode, conversion, encoding), spexd-write (file writes), spexd-stream (bundles
// to the client), other (gRPC's threads, and threads that ended during the run).
//
// Backends: --backend cuda (the CUDA backend, spexd's own choice of workers), or --backend
// replay (tests/bench/replay_backend.h: a stand-in for the GPU that replays CPU-backend
// results, for a machine without one). The replay's own copy of its results is reported
// apart (replay_copy) and left out of spexd's total, since a GPU backend's downloads are not
// such a copy.
//
//   spexd_host_cost_bench --backend cuda|replay --psf PSF.fits --frame FRAME.fits
//       [--frame-gz FRAME.fits.gz] [--arm PSF.fits=PREPROC (repeatable: the exposure's
//       cameras; PREPROC .fits, and PREPROC.gz beside it for the .fits.gz job)]
//       [--petals 1] [--clients 2] [--frames 3] [--nspec 500] [--workers 2 (replay)]
//       [--modes all | comma-separated names] [--work DIR (outputs; tmpfs)]
//       [--spexctl PATH] [--device TEXT] [--record FILE.json] [--replay-dir DIR (--work):
//       the replay's recordings, stored by the first run and read by the next]
//       [--timed-marker FILE (created while each mode's timed part runs, holding the mode's
//       name, removed after it: for a profiler to sample the timed frames alone)]
//       [--shadow-parity-fraction F (0: spexd's sampled parity checks off; its default 0.01)]
// Inputs come from the project's simulator (scripts/host_cost.sh makes them with spexd-sim).
// JSON record (docs/benchmarks) to --record (else stdout); a summary line per mode on stdout,
// spexd's log on stderr.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench_build_info.h"  // generated: SPEXD_BENCH_GIT_SHA
#include "core/base/allocator_settings.h"
#include "core/base/thread_name.h"
#include "core/cpu/blas_core_type.h"
#include "core/io/psf.h"
#include "core/plan/desi_cameras.h"
#include "server/spexd_server.h"
#include "tests/bench/host_cost_options.h"
#include "tests/bench/host_cost_record.h"
#include "tests/bench/host_cpu_snapshot.h"
#include "tests/bench/replay_backend.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using spexd::bench::AllModes;
using spexd::bench::Args;
using spexd::bench::Mode;
using spexd::bench::Parse;
using spexd::bench::Snapshot;
using spexd::bench::TakeSnapshot;

std::string Absolute(const std::string& p) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? p : abs.string();
}

// spexctl: beside this program (a device bundle), else in the build tree.
std::string FindSpexctl() {
  const fs::path self = fs::read_symlink("/proc/self/exe").parent_path();
  for (const fs::path& p : {self / "spexctl", self / "../../client/spexctl"}) {
    if (access(p.c_str(), X_OK) == 0) return Absolute(p.string());
  }
  return "";
}

// Runs one process to its end; its output goes to `log`. OK when it exits 0.
absl::Status RunProcess(const std::vector<std::string>& argv_s, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& s : argv_s) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot start ", argv_s[0], ": ", rc));
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return absl::InternalError(absl::StrCat(argv_s[1], " failed (see ", log, ")"));
  }
  return absl::OkStatus();
}

struct Figures {
  std::string mode;
  int frames = 0;
  double wall = 0, spexd = 0, clients = 0, replay = 0;
  int64_t faults = 0;
  std::map<std::string, double> roles;
};

struct Bench {
  Args args;
  std::string addr, inputs, out_dir, client_dir, logs;
  std::string grid;  // the r frame's wavelength grid
  const spexd::bench::ReplayStore* store = nullptr;

  std::vector<std::string> ExtractArgv(const Mode& m, const std::string& output) const {
    std::vector<std::string> v = {args.spexctl, "extract", "--server", addr, "--server-path", "-q",
                                  "-i", m.gz_in ? args.frame_gz : args.frame, "-p", args.psf,
                                  "-w", grid, "-n", std::to_string(args.nspec)};
    if (m.server_writes) {
      v.insert(v.end(), {"--server-output-path", output});
    } else {
      v.insert(v.end(), {"-o", output});
    }
    return v;
  }

  std::string Output(const Mode& m, int lane, int frame) const {
    return absl::StrCat(m.server_writes ? out_dir : client_dir, "/", m.name, "-c", lane, "-f", frame,
                        m.gz_out ? ".fits.gz" : ".fits");
  }

  // The exposure's frame list: every arm `petals` times, outputs in the output root.
  absl::StatusOr<std::pair<std::string, int>> FrameList(const Mode& m) const {
    const std::string path = absl::StrCat(args.work, "/", m.name, ".txt");
    std::ofstream list(path);
    int n = 0;
    for (const auto& [psf_path, preproc] : args.arms) {
      auto psf = spexd::core::Psf::Load(psf_path);
      if (!psf.ok()) return psf.status();
      auto arm = spexd::core::DesiArmForPsf(*psf);
      if (!arm.ok()) return arm.status();
      for (int p = 0; p < args.petals; ++p) {
        list << preproc << (m.gz_in ? ".gz " : " ") << psf_path << " " << out_dir << "/" << m.name
             << "-" << arm->arm << p << (m.gz_out ? ".fits.gz" : ".fits") << " -w " << arm->GridText()
             << " --psferr " << arm->psferr << "\n";
        ++n;
      }
    }
    if (!list.good()) return absl::InternalError("cannot write " + path);
    return std::make_pair(path, n);
  }

  void Marker(bool on, const Mode& m) const {
    if (args.timed_marker.empty()) return;
    if (on) {  // renamed into place: a watcher never reads it half written
      const std::string tmp = args.timed_marker + ".tmp";
      std::ofstream(tmp) << m.name << "\n";
      std::rename(tmp.c_str(), args.timed_marker.c_str());
    } else {
      std::remove(args.timed_marker.c_str());
    }
  }

  void Clean() const {
    std::error_code ec;
    for (const std::string& d : {out_dir, client_dir}) {
      for (const auto& e : fs::directory_iterator(d, ec)) fs::remove(e.path(), ec);
    }
  }

  absl::StatusOr<Figures> Run(const Mode& m) {
    Clean();
    const std::string log = absl::StrCat(logs, "/", m.name, ".log");
    Figures f;
    f.mode = m.name;
    if (m.exposure) {
      auto list = FrameList(m);
      if (!list.ok()) return list.status();
      const std::vector<std::string> argv = {args.spexctl, "exposure", "--server", addr, "-n",
                                             std::to_string(args.nspec), "--overwrite", "--priority",
                                             "realtime", list->first};
      if (absl::Status st = RunProcess(argv, log); !st.ok()) return st;  // warm-up
      Marker(true, m);
      const Snapshot a = TakeSnapshot(store);
      absl::Status timed = RunProcess(argv, log);
      const Snapshot b = TakeSnapshot(store);
      Marker(false, m);
      if (!timed.ok()) return timed;
      return Finish(m, a, b, list->second);
    }
    // Warm-up, untimed: a frame per client at once, so that the timed frames meet a server
    // whose buffer pools have seen the clients' concurrency.
    absl::Status warm = Lanes(m, -1, 1);
    if (!warm.ok()) return warm;
    Marker(true, m);
    const Snapshot a = TakeSnapshot(store);
    absl::Status timed = Lanes(m, 0, args.frames);
    const Snapshot b = TakeSnapshot(store);
    Marker(false, m);
    if (!timed.ok()) return timed;
    return Finish(m, a, b, args.clients * args.frames);
  }

  // --clients lanes at once, each extracting `frames` frames one after another (numbered
  // from `first`).
  absl::Status Lanes(const Mode& m, int first, int frames) const {
    const std::string log = absl::StrCat(logs, "/", m.name, ".log");
    std::vector<absl::Status> lanes(static_cast<std::size_t>(args.clients));
    std::vector<std::thread> threads;
    for (int c = 0; c < args.clients; ++c) {
      threads.emplace_back([&, c] {
        spexd::core::NameThisThread("bench-lane");
        for (int i = 0; i < frames && lanes[c].ok(); ++i) {
          lanes[c] = RunProcess(ExtractArgv(m, Output(m, c, first + i)), log);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& st : lanes) {
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  Figures Finish(const Mode& m, const Snapshot& a, const Snapshot& b, int frames) const {
    Figures f;
    f.mode = m.name;
    f.frames = frames;
    f.wall = std::chrono::duration<double>(b.at - a.at).count();
    f.replay = b.replay - a.replay;
    f.faults = b.faults - a.faults;
    f.clients = b.children - a.children;
    const double self = b.self - a.self;
    double named = 0;
    for (const auto& [role, secs] : b.roles) {
      if (role == "other") continue;
      const auto it = a.roles.find(role);
      f.roles[role] = secs - (it == a.roles.end() ? 0.0 : it->second);
      named += f.roles[role];
    }
    f.roles["other"] = self - named;  // gRPC's threads, and threads that ended
    f.roles["spexd-worker"] -= f.replay;  // the replay copies on the workers' threads
    f.spexd = self - f.replay - f.roles["bench-lane"];
    f.roles.erase("bench-lane");
    // Files are left for a look until the next mode cleans up.
    return f;
  }
};

std::string Describe(const Mode& m, int clients, int frames_each) {
  if (m.exposure) {
    return absl::StrCat("one exposure job, ", m.gz_in ? ".fits.gz" : ".fits", " in and out");
  }
  return absl::StrCat(m.gz_in ? ".fits.gz" : ".fits", " in, ", m.server_writes ? "server" : "client",
                      "-written ", m.gz_out ? ".fits.gz" : ".fits", " out (", clients,
                      " spexctl x ", frames_each, " frames)");
}

int Fail(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "host_cost_bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);  // as spexd's main does, before any thread
  spexd::core::KeepFreedMemoryForReuse();
  namespace server = spexd::server;
  Bench bench;
  Args& args = bench.args;
  if (!Parse(argc, argv, &args) || args.psf.empty() || args.frame.empty()) {
    std::fprintf(stderr, "usage: see tests/bench/host_cost_bench.cc\n");
    return 2;
  }
  if (args.spexctl.empty()) args.spexctl = FindSpexctl();
  if (args.spexctl.empty()) return Fail("spexctl", absl::NotFoundError("use --spexctl PATH"));
  if (args.work.empty()) args.work = "/dev/shm/spexd_host_cost";
  args.psf = Absolute(args.psf);
  args.frame = Absolute(args.frame);
  if (args.frame_gz.empty()) args.frame_gz = args.frame + ".gz";
  args.frame_gz = Absolute(args.frame_gz);
  for (auto& [psf, preproc] : args.arms) {
    psf = Absolute(psf);
    preproc = Absolute(preproc);
  }
  std::error_code ec;
  fs::create_directories(args.work, ec);
  args.work = Absolute(args.work);
  bench.out_dir = args.work + "/out";
  bench.client_dir = args.work + "/client";
  bench.logs = args.work + "/logs";
  for (const std::string& d : {bench.out_dir, bench.client_dir, bench.logs}) fs::create_directories(d, ec);
  bench.inputs = fs::path(args.frame).parent_path().string();

  std::vector<Mode> modes;
  for (const Mode& m : AllModes()) {
    if (m.exposure && args.arms.empty()) continue;
    if (args.modes == "all" || absl::StrContains(absl::StrCat(",", args.modes, ","), absl::StrCat(",", m.name, ","))) {
      modes.push_back(m);
    }
  }
  {
    auto psf = spexd::core::Psf::Load(args.psf);
    if (!psf.ok()) return Fail("psf", psf.status());
    auto arm = spexd::core::DesiArmForPsf(*psf);
    if (!arm.ok()) return Fail("psf", arm.status());
    bench.grid = arm->GridText();
  }

  server::ServerOptions so;
  so.network.listen = "127.0.0.1:0";
  so.network.metrics_listen.clear();
  std::vector<std::string> roots = {bench.inputs};
  for (const std::string& p : {args.psf}) roots.push_back(fs::path(p).parent_path().string());
  for (const auto& [psf, preproc] : args.arms) {
    roots.push_back(fs::path(psf).parent_path().string());
    roots.push_back(fs::path(preproc).parent_path().string());
  }
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  so.storage.data_roots = roots;
  so.storage.output_roots = {bench.out_dir};
  so.storage.psf_cache_bytes = int64_t{16} << 30;
  so.shadow_parity.fraction = args.shadow_fraction;
  std::shared_ptr<spexd::bench::ReplayStore> store;
  if (args.backend == "replay") {
    store = std::make_shared<spexd::bench::ReplayStore>(0, args.replay_dir.empty() ? args.work : args.replay_dir);
    bench.store = store.get();
    const int workers = args.workers;
    so.workers.backend_factory = [store, workers](std::string* reason)
        -> absl::StatusOr<std::vector<std::unique_ptr<spexd::core::Backend>>> {
      std::vector<std::unique_ptr<spexd::core::Backend>> out;
      for (int w = 0; w < workers; ++w) out.push_back(std::make_unique<spexd::bench::ReplayBackend>(store));
      *reason = absl::StrCat("replay: ", workers, " worker(s)");
      return out;
    };
  } else if (args.backend == "cuda") {
    so.workers.backend = spexd::core::BackendKind::kCuda;
    // As spexd's main: another build's module for an A/B (cuda/host/diagnostics.h).
    if (const char* module = std::getenv("SPEXD_CUDA_MODULE")) so.workers.cuda_module = module;
  } else {
    return Fail("--backend", absl::InvalidArgumentError("cuda or replay"));
  }
  auto srv = server::SpexdServer::Start(so);
  if (!srv.ok()) return Fail("server", srv.status());
  if (absl::Status st = (*srv)->WaitForWarmUp(absl::Seconds(120)); !st.ok()) return Fail("warm-up", st);
  bench.addr = absl::StrCat("127.0.0.1:", (*srv)->port());

  std::vector<spexd::bench::Figure> figures;
  for (const Mode& m : modes) {
    auto f = bench.Run(m);
    if (!f.ok()) return Fail(m.name, f.status());
    const double n = f->frames;
    const std::string what = Describe(m, args.clients, args.frames);
    figures.push_back({m.name + "_cpu_s_per_frame", "host CPU per frame, spexd and clients: " + what,
                       (f->spexd + f->clients) / n, "CPU-s/frame"});
    figures.push_back({m.name + "_spexd_cpu_s_per_frame", "spexd's CPU per frame: " + what, f->spexd / n,
                       "CPU-s/frame"});
    figures.push_back({m.name + "_client_cpu_s_per_frame", "the clients' CPU per frame: " + what,
                       f->clients / n, "CPU-s/frame"});
    std::string roles;
    for (const auto& [role, secs] : f->roles) {
      std::string id = role;
      std::replace(id.begin(), id.end(), '-', '_');
      figures.push_back({absl::StrCat(m.name, "_", id, "_cpu_s_per_frame"),
                         absl::StrCat("spexd's ", role, " threads, CPU per frame: ", what), secs / n,
                         "CPU-s/frame"});
      absl::StrAppend(&roles, absl::StrFormat(" %s %.3f", role, secs / n));
    }
    if (store != nullptr) {
      figures.push_back({m.name + "_replay_copy_cpu_s_per_frame",
                         "the replay backend's copy of its results (left out of spexd's): " + what,
                         f->replay / n, "CPU-s/frame"});
    }
    figures.push_back({m.name + "_spexd_page_faults_per_frame",
                       "spexd's minor page faults per frame (memory mapped afresh): " + what,
                       static_cast<double>(f->faults) / n, "faults/frame"});
    figures.push_back({m.name + "_wall_s_per_frame", "wall time per frame: " + what, f->wall / n, "s/frame"});
    std::printf("host_cost_bench: %-26s %3d frames %6.3f s/frame wall; CPU-s/frame: total %.3f = "
                 "spexd %.3f + clients %.3f (replay copy %.3f apart); %.0f faults/frame; spexd by role:%s\n",
                 m.name.c_str(), f->frames, f->wall / n, (f->spexd + f->clients) / n, f->spexd / n,
                 f->clients / n, f->replay / n, static_cast<double>(f->faults) / n, roles.c_str());
    std::fflush(stdout);
  }
  (*srv)->Drain(absl::Seconds(5));
  const std::string json = spexd::bench::HostCostRecord(
      args.command, args.device.empty() ? spexd::bench::DefaultDevice(args.backend) : args.device,
      figures);
  if (!args.record.empty()) {
    std::ofstream out(args.record);
    out << json;
    if (!out.good()) return Fail("record", absl::InternalError("cannot write " + args.record));
  } else {
    std::fputs(json.c_str(), stdout);
  }
  return 0;
}
