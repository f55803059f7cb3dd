// A file that appears at its path complete or not at all: written through a temporary in
// the same directory (so that the final rename is atomic), synced, then renamed over the
// path. The one implementation behind WriteFileAtomically (a whole file at once) and
// spexctl's frame file written bundle by bundle while the stream arrives.
#ifndef SPEXD_CORE_BASE_ATOMIC_FILE_H_
#define SPEXD_CORE_BASE_ATOMIC_FILE_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spexd::core {

// Temporaries beside an output are named "<prefix>.tmp-<16 hex digits>", the digits drawn
// from getrandom(2): a name nobody can create ahead of the writer (a counter and the pid
// can be guessed, and a file put at the next name would fail the write or be removed by
// it). Both functions below create the name exclusively and draw again when it is taken, so a
// file already there is never touched.
std::string RandomTemporaryName(const std::string& prefix);
// A new named temporary in directory `dirfd` (AT_FDCWD: `prefix` is a path), opened for
// writing with O_CREAT | O_EXCL | O_NOFOLLOW: its descriptor and its name.
absl::StatusOr<std::pair<int, std::string>> CreateNamedTemporary(int dirfd,
                                                                 const std::string& prefix);
// Gives the unnamed (O_TMPFILE) file `fd` a fresh temporary name in `dirfd` (linkat,
// which never replaces); returns the name. The error's code as FileWriteError's.
absl::StatusOr<std::string> LinkUnnamedTemporary(int fd, int dirfd, const std::string& prefix);

class AtomicFile {
 public:
  // The temporary for `path`: unnamed (O_TMPFILE) where the filesystem allows, so that
  // nothing is left even if the process dies, else (or with `unnamed` false: tests) named
  // "<path>.tmp-<random>" (CreateNamedTemporary) and removed on every failure path.
  // INVALID_ARGUMENT when it cannot be created (no such directory, no permission).
  static absl::StatusOr<AtomicFile> Create(const std::string& path, bool unnamed = true);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Uncommitted: closes and removes the temporary.
  ~AtomicFile();

  int fd() const { return fd_; }  // open for writing until Commit or destruction
  const std::string& path() const { return path_; }
  // The temporary's name; empty while it is unnamed.
  const std::string& temporary_name() const { return named_ ? tmp_ : kNone; }

  // fsync, then the name (an unnamed temporary is linked first, LinkUnnamedTemporary):
  // renamed over `path` (an existing file is replaced). Once; on failure nothing is left
  // and no file this object did not create is removed. FileWriteError's code with the
  // failing step.
  absl::Status Commit();

 private:
  AtomicFile() = default;
  void Release();
  static const std::string kNone;
  int fd_ = -1;
  bool named_ = false;  // tmp_ is a name this object created (and removes unless renamed)
  std::string path_, tmp_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_ATOMIC_FILE_H_
