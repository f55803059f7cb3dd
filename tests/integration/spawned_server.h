// A real spexd child process on loopback, for tests that signal, kill or restart it.
#ifndef SPEXD_TESTS_INTEGRATION_SPAWNED_SERVER_H_
#define SPEXD_TESTS_INTEGRATION_SPAWNED_SERVER_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace spexd::testing {

class SpawnedServer {
 public:
  // Runs SPEXD_BINARY on --listen=`listen` with the CPU backend, the test data root and
  // `extra_args`; stderr goes to a log file. `extra_env` ("NAME=value") is added to the
  // child's environment.
  explicit SpawnedServer(std::vector<std::string> extra_args,
                         std::vector<std::string> extra_env = {},
                         const std::string& listen = "127.0.0.1:0");
  ~SpawnedServer();  // SIGKILLs the child if it is still running
  SpawnedServer(const SpawnedServer&) = delete;
  SpawnedServer& operator=(const SpawnedServer&) = delete;

  // The bound port from the "listening" log line (0 after `seconds` without one).
  int WaitForPort(double seconds);
  void Signal(int sig);
  // The exit status (128 + signal when killed), or -1 if it did not exit within `seconds`.
  int WaitForExit(double seconds);
  std::string Log() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string log_path_;
};

// A loopback port that was free a moment ago (for a server that must come back on the
// same address after a restart).
int PickFreePort();

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_INTEGRATION_SPAWNED_SERVER_H_
