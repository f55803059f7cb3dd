// spexctl run as a pipeline worker runs it: one process per call, its exit code and its
// output (stdout and stderr together). For the integration binary, which defines
// SPEXCTL_BINARY (tests/integration/CMakeLists.txt).
#ifndef SPEXD_TESTS_INTEGRATION_SPEXCTL_CLI_H_
#define SPEXD_TESTS_INTEGRATION_SPEXCTL_CLI_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace spexd::testing {

struct CliRun {
  int code = -1;
  std::string output;  // stdout and stderr
};

inline CliRun Spexctl(const std::string& args) {
  CliRun r;
  const std::string cmd = absl::StrCat("timeout 120 ", SPEXCTL_BINARY, " ", args, " 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) r.output += buf;
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_INTEGRATION_SPEXCTL_CLI_H_
