#include "client/spexctl/huge_page_malloc.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace spexd::client {

std::optional<std::string> TunablesWithHugePages(const char* current) {
  constexpr absl::string_view kTunable = "glibc.malloc.hugetlb";
  const absl::string_view now = current != nullptr ? current : "";
  // Tunables are name=value pairs separated by ':'.
  for (absl::string_view pair : absl::StrSplit(now, ':')) {
    if (pair.substr(0, pair.find('=')) == kTunable) return std::nullopt;
  }
  return now.empty() ? absl::StrCat(kTunable, "=1") : absl::StrCat(now, ":", kTunable, "=1");
}

void RestartWithHugePageMalloc(char** argv) {
#if defined(__GLIBC__)
  const std::optional<std::string> tunables = TunablesWithHugePages(std::getenv("GLIBC_TUNABLES"));
  if (!tunables.has_value()) return;
  // The program's own path, not /proc/self/exe: the process keeps its name (ps, top,
  // perf), which the kernel takes from the path executed.
  std::error_code error;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
  if (error || self.empty()) return;
  if (::setenv("GLIBC_TUNABLES", tunables->c_str(), 1) != 0) return;
  ::execv(self.c_str(), argv);
  // Not restarted (no /proc, the file gone since): this process runs on, with 4 KiB pages.
#else
  (void)argv;
#endif
}

}  // namespace spexd::client
