// DataRoots: the roots, the checks of a request's path against them, and the files read
// through them (outputs: data_roots_output.cc).
#include "server/platform/data_roots.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/atomic_file.h"
#include "core/base/error_text.h"
#include "server/platform/path_resolution.h"

namespace spexd::server {

absl::StatusOr<DataRoots> DataRoots::Create(const std::vector<std::string>& roots,
                                            const std::string& flag) {
  DataRoots out;
  out.flag_ = flag;
  for (const std::string& root : roots) {
    if (root.empty()) continue;
    auto canonical = RealPath(root);
    if (!canonical.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", root, ": ",
                                                     std::string(canonical.status().message())));
    }
    struct stat st {};
    if (::stat(canonical->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", root, " is not a directory"));
    }
    out.roots_.push_back(*canonical);
    std::string spelled = root;
    if (spelled[0] != '/') {
      char cwd[PATH_MAX];
      if (::getcwd(cwd, sizeof(cwd)) != nullptr) spelled = absl::StrCat(cwd, "/", root);
    }
    out.lexical_roots_.push_back(LexicalNormal(spelled));
  }
  return out;
}

absl::Status DataRoots::CheckWritable(std::vector<std::string>* full_roots) const {
  for (const std::string& root : roots_) {
    auto refuse = [&](absl::string_view why) {
      return absl::FailedPreconditionError(absl::StrCat(
          flag_, " ", root, " is not writable: ", why, " (the server writes its output files there)"));
    };
    // A full filesystem is writable once space is freed: said, not refused (a server
    // would otherwise not start until then, and then serve its other roots).
    auto full = [&] {
      if (full_roots != nullptr) full_roots->push_back(root);
    };
    const int dirfd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) return refuse(absl::StrCat("cannot open it: ", std::strerror(errno)));
    auto probe = core::CreateNamedTemporary(dirfd, ".spexd-write-probe");
    if (!probe.ok()) {
      ::close(dirfd);
      if (absl::IsResourceExhausted(probe.status())) {
        full();
        continue;
      }
      return refuse(probe.status().message());
    }
    const char byte = 0;
    const int err = ::write(probe->first, &byte, 1) == 1 ? 0 : errno;
    ::close(probe->first);
    ::unlinkat(dirfd, probe->second.c_str(), 0);
    ::close(dirfd);
    if (err == ENOSPC || err == EDQUOT) {
      full();
    } else if (err != 0) {
      return refuse(absl::StrCat("writing a probe file: ", std::strerror(err)));
    }
  }
  return absl::OkStatus();
}

absl::Status DataRoots::CheckSyntax(const std::string& path) const {
  if (roots_.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "this server has no ", flag_ == "--data_roots" ? "data roots" : "output roots", " (",
        flag_, ")", flag_ == "--data_roots" ? ": send the file as an upload" : ""));
  }
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("path '", path, "' must be absolute"));
  }
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("path contains a NUL byte");
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("path '", path, "' contains '..'"));
    }
  }
  const std::string lexical = LexicalNormal(path);
  for (const auto* roots : {&roots_, &lexical_roots_}) {
    for (const std::string& root : *roots) {
      if (UnderRoot(lexical, root)) return absl::OkStatus();
    }
  }
  return Outside(path);
}

absl::Status DataRoots::Outside(const std::string& path) const {
  if (flag_ == "--data_roots") {
    return absl::PermissionDeniedError(
        absl::StrCat("path '", core::EchoValue(path), "' is outside the server's data roots"));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "output path '", core::EchoValue(path), "' is outside the server's output roots (", flag_, ")"));
}

absl::Status DataRoots::Missing(const std::string& path, absl::Status missing) const {
  const std::string location = WouldBeLocation(path);
  if (location.empty() || !Inside(location)) return Outside(path);
  return missing;
}

bool DataRoots::Inside(const std::string& canonical) const {
  for (const std::string& root : roots_) {
    if (UnderRoot(canonical, root)) return true;
  }
  return false;
}

DataRoots::OpenFile::OpenFile(OpenFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), size_(other.size_) {}

DataRoots::OpenFile& DataRoots::OpenFile::operator=(OpenFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    size_ = other.size_;
  }
  return *this;
}

DataRoots::OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string DataRoots::OpenFile::proc_path() const { return absl::StrCat("/proc/self/fd/", fd_); }

absl::StatusOr<DataRoots::OpenFile> DataRoots::Open(const std::string& path,
                                                    int64_t max_bytes) const {
  if (absl::Status s = CheckSyntax(path); !s.ok()) return s;
  // Early, friendly answer for paths that resolve outside (the authoritative check is
  // on the descriptor below).
  auto canonical = RealPath(path);
  if (absl::IsNotFound(canonical.status())) return Missing(path, canonical.status());
  if (!canonical.ok()) return canonical.status();
  if (!Inside(*canonical)) return Outside(path);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever
  // (past any deadline, holding a loader thread); it is refused just below.
  const int raw = ::open(canonical->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (raw < 0) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  OpenFile file(raw, "", 0);
  struct stat st {};
  if (::fstat(raw, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  auto opened = RealPath(file.proc_path());
  if (!opened.ok() || !Inside(*opened)) return Outside(path);
  const int flags = ::fcntl(raw, F_GETFL);
  if (flags >= 0) ::fcntl(raw, F_SETFL, flags & ~O_NONBLOCK);
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(path, " has ", st.st_size,
                                                     " bytes, over the server's limit of ",
                                                     max_bytes, " bytes"));
  }
  return OpenFile(file.Release(), *opened, static_cast<int64_t>(st.st_size));
}

absl::StatusOr<DataRoots::File> DataRoots::ReadFile(const std::string& path,
                                                    int64_t max_bytes) const {
  auto opened = Open(path, max_bytes);
  if (!opened.ok()) return opened.status();
  File file;
  file.path = opened->path();
  file.bytes.resize(static_cast<std::size_t>(opened->size()));
  std::size_t done = 0;
  while (done < file.bytes.size()) {
    ssize_t n = ::read(opened->fd(), file.bytes.data() + done, file.bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;  // file shrank while reading: parse what is there (FITS checks size)
    done += static_cast<std::size_t>(n);
  }
  file.bytes.resize(done);
  return file;
}

absl::StatusOr<DataRoots::FileId> DataRoots::IdOf(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("fstat failed: ", std::strerror(errno)));
  }
  return FileId{st.st_dev, st.st_ino};
}

}  // namespace spexd::server
