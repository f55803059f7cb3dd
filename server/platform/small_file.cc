#include "server/platform/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace spexd::server {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "something else";
}

}  // namespace

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes,
                                          const std::string& what) {
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path, ": ", why));
  };
  // Looked at before it is opened: opening a device can act on it, and a FIFO opened
  // without O_NONBLOCK waits for a writer forever.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return refuse(absl::StrCat("it is ", KindOf(st.st_mode), ", not a regular file"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return refuse(std::strerror(errno));
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  // The file opened may not be the one looked at (replaced meanwhile): checked again.
  if (::fstat(fd, &st) != 0) return refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return refuse(absl::StrCat("it is ", KindOf(st.st_mode), ", not a regular file"));
  }
  const auto too_large = [&] {
    return refuse(
        absl::StrCat("it is over ", max_bytes, " bytes, far more than any such file holds"));
  };
  if (st.st_size > max_bytes) return too_large();
  // Read up to one byte past the bound: a file that grew since fstat is refused too.
  std::string bytes;
  char block[65536];
  for (;;) {
    const ssize_t n = ::read(fd, block, sizeof(block));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(std::strerror(errno));
    if (n == 0) break;
    bytes.append(block, static_cast<std::size_t>(n));
    if (static_cast<int64_t>(bytes.size()) > max_bytes) return too_large();
  }
  return bytes;
}

}  // namespace spexd::server
