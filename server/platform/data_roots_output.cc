// DataRoots' outputs: the checks of an output path and the pending output file, from its
// temporary to its name.
#include "server/platform/data_roots.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/atomic_file.h"
#include "core/base/status_macros.h"
#include "core/base/write_fully.h"
#include "server/platform/path_resolution.h"

namespace spexd::server {

absl::StatusOr<int> DataRoots::OpenOutputDir(const std::string& path, const WritePolicy& policy,
                                             std::string* name, std::string* canonical) const {
  if (absl::Status s = CheckSyntax(path); !s.ok()) return s;
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  *name = path.substr(slash + 1);
  if (name->empty() || *name == "." || *name == ".." || name->size() > NAME_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("output path '", path, "' names no file"));
  }
  const int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    const int err = errno;
    const absl::Status missing =
        absl::InvalidArgumentError(absl::StrCat("output directory ", dir, " does not exist"));
    return err == ENOENT || err == ENOTDIR ? Missing(dir, missing) : missing;
  }
  // The check is on the opened directory: a symlink swapped in afterwards cannot move
  // the write elsewhere (every later step is relative to this descriptor).
  auto real_dir = RealPath(absl::StrCat("/proc/self/fd/", dirfd));
  const std::string full =
      real_dir.ok() ? absl::StrCat(*real_dir == "/" ? "" : *real_dir, "/", *name) : "";
  if (!real_dir.ok() || !Inside(full)) {
    ::close(dirfd);
    return Outside(path);
  }
  struct stat st {};
  if (::fstatat(dirfd, name->c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    absl::Status refuse;
    if (!S_ISREG(st.st_mode)) {
      refuse = absl::PermissionDeniedError(
          absl::StrCat("output path '", path, "' exists and is not a regular file"));
    }
    for (const FileId& id : policy.protected_) {
      if (refuse.ok() && id.dev == st.st_dev && id.ino == st.st_ino) {
        refuse = absl::InvalidArgumentError(absl::StrCat(
            "output path '", path, "' is the request's own input or PSF: never overwritten"));
      }
    }
    if (refuse.ok() && !policy.overwrite && !policy.keep_same) {
      refuse = absl::AlreadyExistsError(absl::StrCat(
          "output path '", path, "' exists; set overwrite in the request to replace it"));
    }
    if (!refuse.ok()) {
      ::close(dirfd);
      return refuse;
    }
  }
  *canonical = full;
  return dirfd;
}

absl::StatusOr<std::string> DataRoots::CheckOutput(const std::string& path,
                                                   const WritePolicy& policy) const {
  std::string name, canonical;
  auto dirfd = OpenOutputDir(path, policy, &name, &canonical);
  if (!dirfd.ok()) return dirfd.status();
  ::close(*dirfd);
  return canonical;
}

DataRoots::PendingOutput::PendingOutput(PendingOutput&& o) noexcept { *this = std::move(o); }

DataRoots::PendingOutput& DataRoots::PendingOutput::operator=(PendingOutput&& o) noexcept {
  if (this != &o) {
    Release();
    dirfd_ = std::exchange(o.dirfd_, -1);
    fd_ = std::exchange(o.fd_, -1);
    unnamed_ = o.unnamed_;
    overwrite_ = o.overwrite_;
    path_ = std::move(o.path_);
    name_ = std::move(o.name_);
    tmp_ = std::move(o.tmp_);
    tmp_prefix_ = std::move(o.tmp_prefix_);
    canonical_ = std::move(o.canonical_);
  }
  return *this;
}

DataRoots::PendingOutput::~PendingOutput() { Release(); }

void DataRoots::PendingOutput::Release() {
  if (fd_ >= 0) ::close(fd_);
  // A named temporary is removed; after a rename the name is gone and this fails quietly.
  if (dirfd_ >= 0 && !tmp_.empty()) ::unlinkat(dirfd_, tmp_.c_str(), 0);
  if (dirfd_ >= 0) ::close(dirfd_);
  fd_ = dirfd_ = -1;
  tmp_.clear();
}

absl::StatusOr<DataRoots::PendingOutput> DataRoots::CreateOutput(const std::string& path,
                                                                 const WritePolicy& policy,
                                                                 bool unnamed_temporary) const {
  PendingOutput out;
  auto opened = OpenOutputDir(path, policy, &out.name_, &out.canonical_);
  if (!opened.ok()) return opened.status();
  out.dirfd_ = *opened;
  out.path_ = path;
  out.overwrite_ = policy.overwrite;
  // The temporary's names are unguessable and created exclusively (core::
  // CreateNamedTemporary, LinkUnnamedTemporary): a file another client put at a likely name
  // neither fails this output nor is removed by it.
  out.tmp_prefix_ = absl::StrCat(".", out.name_.substr(0, 200));
  if (unnamed_temporary) {
    out.fd_ = ::openat(out.dirfd_, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    out.unnamed_ = out.fd_ >= 0;
  }
  if (out.fd_ < 0) {  // no O_TMPFILE here (or not asked for): a named one
    auto named = core::CreateNamedTemporary(out.dirfd_, out.tmp_prefix_);
    if (!named.ok()) {
      const absl::Status& st = named.status();
      return absl::IsResourceExhausted(st)
                 ? st
                 : absl::PermissionDeniedError(
                       absl::StrCat(path, ": cannot create a temporary file: ", st.message()));
    }
    out.fd_ = named->first;
    out.tmp_ = std::move(named->second);
  }
  return out;
}

absl::StatusOr<bool> DataRoots::PendingOutput::KeepExisting(const SameCheck& same) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": already committed"));
  if (overwrite_) return false;
  absl::StatusOr<bool> keep = MatchExisting(same);
  if (keep.ok() && *keep) Release();  // the pending output goes: nothing is written
  return keep;
}

absl::StatusOr<bool> DataRoots::PendingOutput::MatchExisting(const SameCheck& same) const {
  const absl::Status not_regular = absl::PermissionDeniedError(
      absl::StrCat("output path '", path_, "' exists and is not a regular file"));
  // Looked at before it is opened: opening a device (even O_NONBLOCK) can act on it.
  struct stat named {};
  if (::fstatat(dirfd_, name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return false;
    return absl::PermissionDeniedError(absl::StrCat(path_, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(named.st_mode)) return not_regular;
  const int fd = ::openat(dirfd_, name_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return false;  // removed meanwhile: nothing to keep
    if (errno == ELOOP) return not_regular;
    return absl::PermissionDeniedError(absl::StrCat(path_, ": cannot open: ", std::strerror(errno)));
  }
  OpenFile file(fd, "", 0);  // closes it
  struct stat before {}, after {};
  if (::fstat(fd, &before) != 0 || !S_ISREG(before.st_mode)) return not_regular;
  if (absl::Status st = same(fd); !st.ok()) return st;
  // What was compared must still be the file at the name, unchanged, or the reply would
  // name something else.
  auto same_time = [](const timespec& a, const timespec& b) {
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
  };
  if (::fstat(fd, &after) != 0 ||
      ::fstatat(dirfd_, name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      named.st_dev != before.st_dev || named.st_ino != before.st_ino ||
      after.st_size != before.st_size || !same_time(after.st_mtim, before.st_mtim) ||
      !same_time(after.st_ctim, before.st_ctim)) {
    return absl::AbortedError(absl::StrCat("output path '", path_,
                                           "' changed while it was compared with the new output"));
  }
  SPEXD_RETURN_IF_ERROR(CheckDirectoryInPlace("the file there was compared"));
  return true;
}

absl::Status DataRoots::PendingOutput::CheckDirectoryInPlace(absl::string_view what) const {
  const std::size_t slash = canonical_.find_last_of('/');
  const std::string dir = slash == 0 ? std::string("/") : canonical_.substr(0, slash);
  struct stat held {}, named {};
  bool in_place = ::fstat(dirfd_, &held) == 0 && ::stat(dir.c_str(), &named) == 0 &&
                  held.st_dev == named.st_dev && held.st_ino == named.st_ino;
  // The same directory reached through a symlink put at its old name is not in place
  // either: its own path (which the kernel keeps for the descriptor) must be `dir`.
  if (in_place) {
    auto now = RealPath(absl::StrCat("/proc/self/fd/", dirfd_));
    in_place = now.ok() && *now == dir;
  }
  if (in_place) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("output directory ", dir, " was moved or replaced while ",
                                         what, ": '", path_, "' would not name the file"));
}

absl::StatusOr<std::string> DataRoots::PendingOutput::Commit(const SameCheck& same, bool* kept) {
  if (kept != nullptr) *kept = false;
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": already committed"));
  absl::Status st;
  if (::fsync(fd_) != 0) st = core::FileWriteError(path_, "flush", errno);
  if (st.ok() && unnamed_) {
    auto linked = core::LinkUnnamedTemporary(fd_, dirfd_, tmp_prefix_);
    if (linked.ok()) {
      tmp_ = *std::move(linked);
    } else {
      st = linked.status();
    }
  }
  if (st.ok() && ::close(std::exchange(fd_, -1)) != 0) st = core::FileWriteError(path_, "close", errno);
  // Nothing is named in a directory that moved while the file was written (the
  // temporary goes with this output).
  if (st.ok()) st = CheckDirectoryInPlace("the file was written");
  if (st.ok()) {
    // Without overwrite, never replace a file that appeared since the check.
    const unsigned flags = overwrite_ ? 0u : RENAME_NOREPLACE;
    if (::renameat2(dirfd_, tmp_.c_str(), dirfd_, name_.c_str(), flags) != 0) {
      const int err = errno;
      if (err == EEXIST) {
        st = absl::AlreadyExistsError(absl::StrCat(
            "output path '", path_, "' exists; set overwrite in the request to replace it"));
      } else if (err == EINVAL && !overwrite_) {
        // A filesystem without RENAME_NOREPLACE: link() never replaces either.
        if (::linkat(dirfd_, tmp_.c_str(), dirfd_, name_.c_str(), 0) != 0) {
          st = errno == EEXIST
                   ? absl::AlreadyExistsError(absl::StrCat("output path '", path_, "' exists"))
                   : core::FileWriteError(path_, "link", errno);
        }
      } else {
        st = core::FileWriteError(path_, "rename", err);
      }
    }
  }
  // Gone after a rename; the leftover otherwise (only a name this output created).
  if (!tmp_.empty()) ::unlinkat(dirfd_, tmp_.c_str(), 0);
  tmp_.clear();
  if (st.ok()) ::fsync(dirfd_);  // the new name survives a crash
  // Moved between the check above and the rename: the file has its name, but in the
  // directory's new place, which the reply cannot name.
  if (st.ok()) st = CheckDirectoryInPlace("the file was named");
  if (absl::IsAlreadyExists(st) && same) {
    // A file created since KeepExisting (or a caller that skipped it): RENAME_NOREPLACE
    // left it in place; it is kept if it is this output (a concurrent identical request).
    absl::StatusOr<bool> keep = MatchExisting(same);
    if (!keep.ok()) st = keep.status();
    if (keep.ok() && *keep) st = absl::OkStatus();
    if (keep.ok() && *keep && kept != nullptr) *kept = true;
  }
  Release();
  if (!st.ok()) return st;
  return canonical_;
}

absl::StatusOr<std::string> DataRoots::WriteFile(const std::string& path, const std::string& bytes,
                                                 const WritePolicy& policy) const {
  auto out = CreateOutput(path, policy);
  if (!out.ok()) return out.status();
  SPEXD_RETURN_IF_ERROR(core::WriteFully(out->fd(), bytes.data(), bytes.size(), -1, path));
  return out->Commit();
}

}  // namespace spexd::server
