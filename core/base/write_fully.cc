#include "core/base/write_fully.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace spexd::core {

absl::Status WriteFully(int fd, const char* data, std::size_t n, int64_t offset,
                        absl::string_view what) {
  while (n > 0) {
    const ssize_t w = offset >= 0 ? ::pwrite(fd, data, n, static_cast<off_t>(offset))
                                  : ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return absl::InternalError(
          absl::StrCat(what, ": write failed: ", std::strerror(w < 0 ? errno : EIO)));
    }
    data += w;
    n -= static_cast<std::size_t>(w);
    if (offset >= 0) offset += w;
  }
  return absl::OkStatus();
}

}  // namespace spexd::core
