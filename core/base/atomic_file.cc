#include "core/base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

std::atomic<unsigned> g_tmp_counter{0};

std::filesystem::path DirectoryOf(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

}  // namespace

const std::string AtomicFile::kNone;

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& path, bool unnamed) {
  AtomicFile f;
  f.path_ = path;
  f.tmp_ = absl::StrCat(path, ".tmp-", ::getpid(), "-", g_tmp_counter.fetch_add(1));
  const std::filesystem::path dir = DirectoryOf(path);
  if (unnamed) f.fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (f.fd_ < 0) {
    f.fd_ = ::open(f.tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    f.named_ = f.fd_ >= 0;
  }
  if (f.fd_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot create temporary file: ", std::strerror(errno)));
  }
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept { *this = std::move(o); }

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    Release();
    fd_ = std::exchange(o.fd_, -1);
    named_ = std::exchange(o.named_, false);
    path_ = std::move(o.path_);
    tmp_ = std::move(o.tmp_);
  }
  return *this;
}

AtomicFile::~AtomicFile() { Release(); }

void AtomicFile::Release() {
  if (fd_ >= 0) ::close(fd_);
  if (named_) ::unlink(tmp_.c_str());
  fd_ = -1;
  named_ = false;
}

absl::Status AtomicFile::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": already committed"));
  absl::Status st;
  if (::fsync(fd_) != 0) {
    st = absl::InternalError(absl::StrCat(path_, ": flush failed: ", std::strerror(errno)));
  }
  if (st.ok() && !named_) {
    ::fchmod(fd_, 0644);
    const std::string proc = absl::StrCat("/proc/self/fd/", fd_);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      st = absl::InternalError(absl::StrCat(path_, ": link failed: ", std::strerror(errno)));
    }
    named_ = st.ok();
  }
  if (::close(std::exchange(fd_, -1)) != 0 && st.ok()) {
    st = absl::InternalError(absl::StrCat(path_, ": close failed: ", std::strerror(errno)));
  }
  if (st.ok() && std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    st = absl::InternalError(absl::StrCat(path_, ": rename failed: ", std::strerror(errno)));
  }
  if (st.ok()) {
    named_ = false;  // the name is the output's now
    // The rename is durable once the directory is synced too (as the server's outputs
    // are). Best effort: the file is complete and in place either way.
    const int dfd = ::open(DirectoryOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  Release();                    // removes the temporary after a failure
  return st;
}

}  // namespace spexd::core
