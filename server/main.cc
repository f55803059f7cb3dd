// spexd: the extraction service. Flags are defined here only (docs/design.md), each from its one
// entry in SPEXD_SERVER_FLAGS (server/server_config.h); everything else takes the typed
// ServerConfig they fill.
#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/base/allocator_settings.h"
#include "core/base/program_help.h"
#include "core/base/status_macros.h"
#include "core/base/version.h"
#include "core/cpu/blas_core_type.h"
#include "server/platform/config_file.h"
#include "server/platform/log.h"
#include "server/server_config.h"
#include "server/spexd_server.h"

ABSL_FLAG(std::string, config, "", "optional file of key = value lines mirroring these flags");
// The flags of SPEXD_SERVER_FLAGS (server/server_config.h), each defined here from its one
// entry there: its type is its codec's, its default the member's default.
#define SPEXD_DEFINE_FLAG_AS(codec, name, member, help) \
  ABSL_FLAG(codec::Flag, name, codec::Show(spexd::server::ServerConfig().member), help);
#define SPEXD_DEFINE_FLAG(name, member, help) \
  SPEXD_DEFINE_FLAG_AS(SPEXD_FLAG_CODEC(member), name, member, help)
#define SPEXD_DEFINE_FLAG_IN(name, member, lo, hi, help) SPEXD_DEFINE_FLAG(name, member, help)
SPEXD_SERVER_FLAGS(SPEXD_DEFINE_FLAG, SPEXD_DEFINE_FLAG_AS, SPEXD_DEFINE_FLAG_IN)
#undef SPEXD_DEFINE_FLAG
#undef SPEXD_DEFINE_FLAG_AS
#undef SPEXD_DEFINE_FLAG_IN

namespace {

using spexd::server::Log;
using spexd::server::LogLevel;
using spexd::server::ServerConfig;

int Fail(const std::string& message) {
  Log(LogLevel::kError, "startup_failed", {{"error", message}});
  return 1;
}

pthread_t g_main_thread;

// SIGTERM/SIGINT taken by a thread that a library started before main() blocked them
// (OpenBLAS starts its pool at load time) would otherwise kill the process, e.g. the
// second SIGTERM of a Slurm job end (the step's and the script's) in the middle of the
// drain. Hand it to the main thread, which takes it with sigwait or leaves it pending.
// pthread_kill is async-signal-safe.
void ForwardToMainThread(int sig) { pthread_kill(g_main_thread, sig); }

// Signals whose default action would end the server at once, with work in flight and no
// log line, though nothing asks it to stop: a stray `kill -USR1` (log rotation scripts
// send it to daemons), SIGUSR2, SIGALRM. Taken by the main thread, logged and ignored.
constexpr int kIgnoredSignals[] = {SIGUSR1, SIGUSR2, SIGALRM};

const char* SignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGALRM: return "SIGALRM";
    default: return "other";
  }
}

// `--help` lists the flags of the files that match; absl's default matches only a file
// named after the program (spexd.cc), so main.cc's flags were left out.
bool IsSpexdFlagFile(absl::string_view file) { return absl::StrContains(file, "server/"); }

// The one place the flags are read (docs/design.md): into the typed configuration, then its
// one validation (server/server_config.h).
absl::StatusOr<ServerConfig> ConfigFromFlags() {
  using namespace spexd::server;
  ServerConfig config;
#define SPEXD_READ_FLAG_AS(codec, name, member, help) \
  SPEXD_RETURN_IF_ERROR(codec::Set(absl::GetFlag(FLAGS_##name), &config.member));
#define SPEXD_READ_FLAG(name, member, help) \
  SPEXD_READ_FLAG_AS(SPEXD_FLAG_CODEC(member), name, member, help)
  // The ranges of FLAG_IN are checked with the rest (ValidateServerConfig).
#define SPEXD_READ_FLAG_IN(name, member, lo, hi, help) SPEXD_READ_FLAG(name, member, help)
  SPEXD_SERVER_FLAGS(SPEXD_READ_FLAG, SPEXD_READ_FLAG_AS, SPEXD_READ_FLAG_IN)
#undef SPEXD_READ_FLAG
#undef SPEXD_READ_FLAG_AS
#undef SPEXD_READ_FLAG_IN
  SPEXD_RETURN_IF_ERROR(ValidateServerConfig(config));
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);  // before any thread (blas_core_type.h)
  spexd::core::KeepFreedMemoryForReuse();
  using namespace spexd::server;
  // Signals are taken synchronously by sigwait below; block them before any thread
  // (gRPC, the metrics server, workers) starts so that every thread inherits the mask. SIGHUP
  // (a closed terminal, a supervisor's reload) drains like SIGTERM: its default action
  // killed the server with requests in flight and no log line. Started
  // with SIGHUP ignored (nohup), it stays ignored.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  struct sigaction hup {};
  const bool take_hup = sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN;
  if (take_hup) sigaddset(&signals, SIGHUP);
  for (int sig : kIgnoredSignals) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  g_main_thread = pthread_self();
  struct sigaction forward = {};
  forward.sa_handler = ForwardToMainThread;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGINT, &forward, nullptr);
  if (take_hup) sigaction(SIGHUP, &forward, nullptr);
  for (int sig : kIgnoredSignals) sigaction(sig, &forward, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  absl::SetProgramUsageMessage(
      "the DESI spectral extraction service (gRPC); the flags can also be given as "
      "key = value lines in a --config file");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = IsSpexdFlagFile;
  usage.contains_helpshort_flags = IsSpexdFlagFile;
  // Abseil's default --version prints the program's path and, whenever the Abseil library
  // itself was built without NDEBUG (Debian's is), "Debug build (NDEBUG not #defined)",
  // whatever spexd's own build type: the version number instead.
  usage.version_string = [] { return absl::StrCat("spexd ", spexd::core::kSpexdVersion, "\n"); };
  absl::SetFlagsUsageConfig(usage);
  if (spexd::core::PrintHelpIfAsked(argc, argv, IsSpexdFlagFile)) return 0;
  auto merged = MergeConfigArgs(argc, argv);
  if (!merged.ok()) return Fail(merged.status().ToString());
  std::vector<char*> args;
  for (std::string& a : *merged) args.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());

  absl::StatusOr<ServerConfig> config = ConfigFromFlags();
  if (!config.ok()) return Fail(std::string(config.status().message()));
  SetMinLogLevel(config->log_level);
  ServerOptions o = std::move(config->server);
  // The backends' two environment switches (docs/service.md, "Environment variables"), read
  // here so that core reads no environment.
  if (o.workers.cuda_module.empty()) {
    if (const char* module = std::getenv("SPEXD_CUDA_MODULE")) o.workers.cuda_module = module;
  }
  if (const char* faults = std::getenv("SPEXD_TEST_CPU_FAULTS")) o.workers.cpu_test_faults = faults;
  const double drain_seconds = config->drain_seconds;

  auto server = SpexdServer::Start(std::move(o));
  if (!server.ok()) return Fail(server.status().ToString());
  // A warm-up that fails (a --gpu_devices entry with no such GPU, --backend=cuda without
  // one, a preloaded PSF that cannot be read) is a configuration error: exit with it rather
  // than stay NOT_SERVING for good. The watcher wakes the signal wait below with a signal
  // to the main thread itself: sent to the process, it could go to a thread started
  // before the mask above (a library's, at load time) and kill the process outright.
  std::atomic<bool> warmup_failed{false};
  const pthread_t main_thread = pthread_self();
  std::thread warmup_watcher([&server, &warmup_failed, main_thread] {
    const absl::Status warm = (*server)->WaitForWarmUp(absl::InfiniteDuration());
    if (warm.ok()) return;
    warmup_failed.store(true);
    Fail(warm.ToString());
    pthread_kill(main_thread, SIGTERM);
  });

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) break;
    Log(LogLevel::kWarning, "signal_ignored", {{"signal", SignalName(sig)}});
  }
  if (!warmup_failed.load()) Log(LogLevel::kInfo, "signal", {{"signal", SignalName(sig)}});
  (*server)->Drain(absl::Seconds(drain_seconds));
  warmup_watcher.join();  // Drain ends the warm-up, so the watcher has returned
  server->reset();
  const int code = warmup_failed.load() ? 1 : 0;
  Log(LogLevel::kInfo, "exit", {{"code", code}});
  return code;
}
