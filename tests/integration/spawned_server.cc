#include "tests/integration/spawned_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/integration/service_fixture.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

extern char** environ;

namespace spexd::testing {

using Clock = std::chrono::steady_clock;

SpawnedServer::SpawnedServer(std::vector<std::string> extra_args,
                             std::vector<std::string> extra_env, const std::string& listen) {
  log_path_ = MakeTempDir() + "/spexd.log";
  std::vector<std::string> args = {SPEXD_BINARY, "--listen=" + listen, "--metrics_listen=",
                                   "--backend=cpu", "--data_roots=" + Inputs().data_dir};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  // Everything the child needs is built before fork(): it only execs.
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    // As a service starts: a test run under nohup must not make spexd ignore SIGHUP.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGHUP, &dfl, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
}

SpawnedServer::~SpawnedServer() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

namespace {

// The port of the first "listening" log line, 0 when there is none yet.
int ListeningPort(const std::string& log) {
  const std::size_t line = log.find("\"event\":\"listening\"");
  if (line == std::string::npos) return 0;
  const std::string key = "\"port\":";
  const std::size_t at = log.find(key, line);
  if (at == std::string::npos) return 0;
  return std::atoi(log.c_str() + at + key.size());
}

}  // namespace

int SpawnedServer::WaitForPort(double seconds) {
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (Clock::now() < end) {
    if (const int port = ListeningPort(Log()); port > 0) return port;
    if (exited_ || waitpid(pid_, nullptr, WNOHANG) == pid_) {
      exited_ = true;
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

void SpawnedServer::Signal(int sig) { kill(pid_, sig); }

int SpawnedServer::WaitForExit(double seconds) {
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (Clock::now() < end) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string SpawnedServer::Log() const { return ReadBytes(log_path_); }

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace spexd::testing
