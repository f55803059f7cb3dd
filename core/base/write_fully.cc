#include "core/base/write_fully.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spexd::core {

absl::Status WriteFully(int fd, const char* data, std::size_t n, int64_t offset,
                        absl::string_view what) {
  while (n > 0) {
    const ssize_t w = offset >= 0 ? ::pwrite(fd, data, n, static_cast<off_t>(offset))
                                  : ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return FileWriteError(what, "write", w < 0 ? errno : EIO);
    }
    data += w;
    n -= static_cast<std::size_t>(w);
    if (offset >= 0) offset += w;
  }
  return absl::OkStatus();
}

void StartWriteback(int fd, int64_t offset, int64_t n) {
  constexpr int64_t kPage = 4096;
  const int64_t begin = (offset + kPage - 1) / kPage * kPage;
  const int64_t end = (offset + n) / kPage * kPage;
  if (end > begin) (void)::sync_file_range(fd, begin, end - begin, SYNC_FILE_RANGE_WRITE);
}

absl::Status FileWriteError(absl::string_view what, absl::string_view step, int err) {
  std::string message = absl::StrCat(what, ": ", step, " failed: ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(std::move(message));
  return absl::InternalError(std::move(message));
}

}  // namespace spexd::core
