#include "client/spexctl/huge_page_malloc.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace spexd::client {

std::optional<std::string> TunablesWithHugePages(const char* current) {
  constexpr std::string_view kTunable = "glibc.malloc.hugetlb";
  const std::string now = current != nullptr ? current : "";
  // Tunables are name=value pairs separated by ':'.
  std::size_t at = 0;
  while (at <= now.size()) {
    const std::size_t end = std::min(now.find(':', at), now.size());
    const std::string_view pair = std::string_view(now).substr(at, end - at);
    if (pair.substr(0, pair.find('=')) == kTunable) return std::nullopt;
    at = end + 1;
  }
  return now.empty() ? std::string(kTunable) + "=1" : now + ":" + std::string(kTunable) + "=1";
}

void RestartWithHugePageMalloc(char** argv) {
#if defined(__GLIBC__)
  const std::optional<std::string> tunables = TunablesWithHugePages(std::getenv("GLIBC_TUNABLES"));
  if (!tunables.has_value()) return;
  // The program's own path, not /proc/self/exe: the process keeps its name (ps, top,
  // perf), which the kernel takes from the path executed.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof(self) - 1) return;
  self[n] = '\0';
  if (::setenv("GLIBC_TUNABLES", tunables->c_str(), 1) != 0) return;
  ::execv(self, argv);
  // Not restarted (no /proc, the file gone since): this process runs on, with 4 KiB pages.
#else
  (void)argv;
#endif
}

}  // namespace spexd::client
