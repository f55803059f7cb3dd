#include "tests/bench/host_cost_record.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_build_info.h"  // generated: SPEXD_BENCH_GIT_SHA

namespace spexd::bench {
namespace {

std::string Today() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string DefaultDevice(const std::string& backend) {
  utsname u{};
  uname(&u);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (backend == "replay") return absl::StrCat(cores, "-core ", u.machine, ", no GPU (replay backend)");
  return absl::StrCat("CUDA backend, ", cores, " vCPUs");
}

std::string HostCostRecord(const std::string& command, const std::string& device,
                           const std::vector<Figure>& figures) {
  const char* sha_env = std::getenv("SPEXD_GIT_SHA");
  std::string sha = sha_env != nullptr ? sha_env : SPEXD_BENCH_GIT_SHA;
  std::string out = absl::StrCat("{\"benchmark\": \"spexd_host_cost_bench\", \"command\": ",
                                 JsonString(command), ", \"device\": ",
                                 JsonString(device),
                                 ", \"date\": \"", Today(), "\", \"commit\": ", JsonString(sha),
                                 ", \"figures\": [");
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const Figure& f = figures[i];
    absl::StrAppend(&out, i ? ",\n  " : "\n  ", "{\"name\": ", JsonString(f.name), ", \"label\": ",
                    JsonString(f.label), ", \"value\": ", absl::StrFormat("%.4g", f.value),
                    ", \"unit\": ", JsonString(f.unit), "}");
  }
  return out + "\n]}\n";
}

}  // namespace spexd::bench
