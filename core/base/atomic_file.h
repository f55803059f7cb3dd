// A file that appears at its path complete or not at all: written through a temporary in
// the same directory (so that the final rename is atomic), synced, then renamed over the
// path. The one implementation behind WriteFileAtomically (a whole file at once) and
// spexctl's frame file written bundle by bundle while the stream arrives.
#ifndef SPEXD_CORE_BASE_ATOMIC_FILE_H_
#define SPEXD_CORE_BASE_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spexd::core {

class AtomicFile {
 public:
  // The temporary for `path`: unnamed (O_TMPFILE) where the filesystem allows, so that
  // nothing is left even if the process dies, else (or with `unnamed` false: tests) named
  // "<path>.tmp-<pid>-<n>" (O_EXCL) and removed on every failure path. INVALID_ARGUMENT
  // when it cannot be created (no such directory, no permission).
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

  // fsync, then the name: renamed over `path` (an existing file is replaced). Once; on
  // failure nothing is left. INTERNAL with the failing step.
  absl::Status Commit();

 private:
  AtomicFile() = default;
  void Release();
  static const std::string kNone;
  int fd_ = -1;
  bool named_ = false;
  std::string path_, tmp_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_ATOMIC_FILE_H_
