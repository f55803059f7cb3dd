#include "tests/bench/host_cpu_snapshot.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_split.h"

namespace spexd::bench {
namespace {

namespace fs = std::filesystem;

double CpuSeconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

// CPU seconds of this process's live threads by role (thread name, digits dropped).
std::map<std::string, double> ThreadRoles() {
  std::map<std::string, double> out;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::string name = text.substr(open + 1, close - open - 1);
    while (!name.empty() && name.back() >= '0' && name.back() <= '9') name.pop_back();
    std::vector<std::string> f = absl::StrSplit(text.substr(close + 2), ' ', absl::SkipEmpty());
    if (f.size() < 13) continue;  // f[0] is the state (field 3); utime, stime: fields 14, 15
    const double cpu = (std::atof(f[11].c_str()) + std::atof(f[12].c_str())) / tick;
    const bool known = name == "spexd-load" || name == "spexd-worker" || name == "spexd-host" ||
                       name == "spexd-write" || name == "spexd-stream" || name == "bench-lane";
    out[known ? name : "other"] += cpu;
  }
  return out;
}

}  // namespace

Snapshot TakeSnapshot(const ReplayStore* store) {
  Snapshot s;
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  s.self = CpuSeconds(r);
  s.faults = r.ru_minflt;
  getrusage(RUSAGE_CHILDREN, &r);
  s.children = CpuSeconds(r);
  s.roles = ThreadRoles();
  s.replay = store != nullptr ? store->copy_cpu_seconds() : 0;
  s.at = std::chrono::steady_clock::now();
  return s;
}

}  // namespace spexd::bench
