#include "tests/bench/rpc_bench_clients.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/spexctl/remote_frame.h"
#include "core/plan/geometry.h"

extern char** environ;

namespace spexd::bench {

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double SteadyNow() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

double SteadyInterval(std::vector<double> done) {
  if (done.size() < 2) return 0;
  std::sort(done.begin(), done.end());
  return (done.back() - done.front()) / static_cast<double>(done.size() - 1);
}

Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stats s;
  s.median = v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.p90 = v[std::min(v.size() - 1, static_cast<std::size_t>(0.9 * static_cast<double>(v.size())))];
  return s;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "rpc_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

std::string GitSha() {
  const char* sha = std::getenv("SPEXD_GIT_SHA");
  return sha != nullptr ? sha : "unknown";
}

spexd::v1::ExtractHeader MakeHeader(const std::string& psf_id, const std::string& frame_path,
                                    int fibers) {
  spexd::core::ExtractionParams params;  // r grid 5760-7620, 0.8 (desi_proc's r camera)
  spexd::v1::ExtractHeader header;
  header.set_psf_id(psf_id);
  header.set_server_path(frame_path);
  header.mutable_params()->set_wmin(params.wmin);
  header.mutable_params()->set_wmax(params.wmax);
  header.mutable_params()->set_dw(params.dw);
  header.mutable_params()->set_nspec(fibers);
  return header;
}

absl::Status RemoteFrame(spexd::client::SpexdClient& c, const spexd::v1::ExtractHeader& header,
                         spexd::v1::ExtractSummary* summary) {
  spexd::client::RemoteFrameBuilder builder;
  spexd::client::ExtractCallbacks cb;
  cb.on_header = [&](const spexd::v1::FrameHeader& h) { return builder.OnHeader(h); };
  cb.on_bundle = [&](spexd::v1::BundleData&& b) { return builder.OnBundle(std::move(b)); };
  cb.on_summary = [&](const spexd::v1::ExtractSummary& s) { *summary = s; };
  absl::Status st = c.Extract(header, nullptr, false, cb);
  if (!st.ok()) return st;
  return builder.Finish().status();
}

int RunClient(const std::string& target, const std::string& psf_id, const std::string& frame,
              int fibers, int frames) {
  spexd::client::ClientOptions co;
  co.target = target;
  auto cli = spexd::client::SpexdClient::Create(co);
  if (!cli.ok()) return Fail("client", cli.status());
  const spexd::v1::ExtractHeader header = MakeHeader(psf_id, frame, fibers);
  for (int r = 0; r < frames; ++r) {
    spexd::v1::ExtractSummary summary;
    const auto t0 = Clock::now();
    if (absl::Status st = RemoteFrame(**cli, header, &summary); !st.ok()) {
      return Fail("remote extract", st);
    }
    for (const auto& [stage, secs] : summary.stage_seconds()) {
      std::printf("stage %s %.6f\n", stage.c_str(), secs);
    }
    std::printf("frame %.6f %.6f %.6f %.6f\n", SteadyNow(), Since(t0), summary.extract_seconds(),
                summary.load_seconds());
    std::fflush(stdout);
  }
  return 0;
}

ProcResult RunClientProcesses(int procs, int frames_each, int fibers, const std::string& target,
                              const std::string& psf_id, const std::string& frame_path,
                              const std::string& dir) {
  ProcResult out;
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  out.start = SteadyNow();
  for (int k = 0; k < procs; ++k) {
    const std::string log = absl::StrCat(dir, "/client", k, ".txt");
    logs.push_back(log);
    std::vector<std::string> argv_s = {"/proc/self/exe", "--client-only", "1",       "--target",
                                       target,           "--psf-id",      psf_id,    "--frame",
                                       frame_path,       "--fibers",      std::to_string(fibers),
                                       "--frames",       std::to_string(frames_each)};
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      out.status = absl::InternalError(absl::StrCat("posix_spawn failed: ", rc));
      break;
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      out.status = absl::InternalError(absl::StrCat("client process ", pid, " failed"));
    }
  }
  out.end = SteadyNow();
  for (const std::string& log : logs) {
    std::ifstream in(log);
    std::string word;
    while (in >> word) {
      if (word == "stage") {
        std::string name;
        double secs = 0;
        in >> name >> secs;
        out.stages[name].push_back(secs);
        continue;
      }
      double done = 0, secs = 0, ext = 0, load = 0;
      if (!(in >> done >> secs >> ext >> load)) break;
      out.done.push_back(done);
      out.seconds.push_back(secs);
      out.extract.push_back(ext);
      out.load.push_back(load);
    }
  }
  if (out.status.ok() && out.done.size() != static_cast<std::size_t>(procs) * frames_each) {
    out.status = absl::InternalError(absl::StrCat("client processes reported ", out.done.size(),
                                                  " frames, expected ", procs * frames_each));
  }
  return out;
}

}  // namespace spexd::bench
