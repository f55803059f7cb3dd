#include "core/base/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/write_fully.h"

namespace spexd::core {
namespace {

// Names drawn before giving up: a collision of 64 random bits is itself a sign that
// something else is wrong (the directory is full of our names, or getrandom is broken).
constexpr int kNameTries = 16;

std::filesystem::path DirectoryOf(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

}  // namespace

std::string RandomTemporaryName(const std::string& prefix) {
  uint64_t bits = 0;
  std::size_t got = 0;
  while (got < sizeof(bits)) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(&bits) + got, sizeof(bits) - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      break;  // no entropy source: the clock and a counter still make names hard to race
    }
  }
  if (got < sizeof(bits)) {
    static std::atomic<uint64_t> counter{0};
    bits ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
                0x9E3779B97F4A7C15ull +
            counter.fetch_add(1);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(bits));
  return absl::StrCat(prefix, ".tmp-", hex);
}

absl::StatusOr<std::pair<int, std::string>> CreateNamedTemporary(int dirfd,
                                                                 const std::string& prefix) {
  int err = EEXIST;
  for (int i = 0; i < kNameTries && err == EEXIST; ++i) {
    std::string name = RandomTemporaryName(prefix);
    const int fd =
        ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return std::make_pair(fd, std::move(name));
    err = errno;
  }
  return FileWriteError(prefix, "creating a temporary file", err);
}

absl::StatusOr<std::string> LinkUnnamedTemporary(int fd, int dirfd, const std::string& prefix) {
  const std::string proc = absl::StrCat("/proc/self/fd/", fd);
  int err = EEXIST;
  for (int i = 0; i < kNameTries && err == EEXIST; ++i) {
    std::string name = RandomTemporaryName(prefix);
    if (::linkat(AT_FDCWD, proc.c_str(), dirfd, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return name;
    err = errno;
  }
  return FileWriteError(prefix, "link", err);
}

const std::string AtomicFile::kNone;

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& path, bool unnamed) {
  AtomicFile f;
  f.path_ = path;
  const std::filesystem::path dir = DirectoryOf(path);
  if (unnamed) f.fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (f.fd_ < 0) {
    auto named = CreateNamedTemporary(AT_FDCWD, path);
    if (!named.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot create temporary file: ", named.status().message()));
    }
    f.fd_ = named->first;
    f.tmp_ = std::move(named->second);
    f.named_ = true;
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
  if (::fsync(fd_) != 0) st = FileWriteError(path_, "flush", errno);
  if (st.ok() && !named_) {
    ::fchmod(fd_, 0644);
    auto linked = LinkUnnamedTemporary(fd_, AT_FDCWD, path_);
    if (linked.ok()) {
      tmp_ = *std::move(linked);
      named_ = true;
    } else {
      st = linked.status();
    }
  }
  if (::close(std::exchange(fd_, -1)) != 0 && st.ok()) st = FileWriteError(path_, "close", errno);
  if (st.ok() && std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    st = FileWriteError(path_, "rename", errno);
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
