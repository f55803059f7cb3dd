// Confines request paths to the configured data roots (--data_roots): no `..`, and no
// symlink that leads outside a root, whether in the middle of the path or at its end.
#ifndef SPEXD_SERVER_DATA_ROOTS_H_
#define SPEXD_SERVER_DATA_ROOTS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::server {

class DataRoots {
 public:
  // Canonicalises the roots; each must be an existing directory. An empty list is
  // allowed and refuses every path (clients must upload).
  static absl::StatusOr<DataRoots> Create(const std::vector<std::string>& roots);

  const std::vector<std::string>& roots() const { return roots_; }

  // A file opened through the policy: the descriptor stays open (closed on destruction),
  // so readers that take a path can use proc_path(), which names this very file even if
  // the directory entry is swapped afterwards.
  class OpenFile {
   public:
    OpenFile(int fd, std::string path, int64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
    OpenFile(OpenFile&& other) noexcept;
    OpenFile& operator=(OpenFile&& other) noexcept;
    OpenFile(const OpenFile&) = delete;
    OpenFile& operator=(const OpenFile&) = delete;
    ~OpenFile();
    int fd() const { return fd_; }
    const std::string& path() const { return path_; }  // canonical path
    int64_t size() const { return size_; }
    std::string proc_path() const;  // /proc/self/fd/<fd>
    int Release() { return std::exchange(fd_, -1); }  // the caller now owns the descriptor

   private:
    int fd_ = -1;
    std::string path_;
    int64_t size_ = 0;
  };
  // Opens `path` if its canonical location lies inside a root and it is a regular file
  // of at most `max_bytes`. The check is made on the opened descriptor
  // (/proc/self/fd), so a symlink swapped in after the check cannot redirect the read.
  // INVALID_ARGUMENT for a malformed path (relative, `..`), PERMISSION_DENIED outside
  // the roots, NOT_FOUND when missing, RESOURCE_EXHAUSTED over the size limit.
  absl::StatusOr<OpenFile> Open(const std::string& path, int64_t max_bytes) const;

  // A file read through the policy: its canonical path and contents.
  struct File {
    std::string path;
    std::string bytes;
  };
  // Open, then read the whole file. Same errors.
  absl::StatusOr<File> ReadFile(const std::string& path, int64_t max_bytes) const;

  // Checks an output path: its directory must exist inside a root; the file itself, if
  // it exists, must be a regular file (not a symlink). Returns the canonical path.
  absl::StatusOr<std::string> ResolveForWrite(const std::string& path) const;

 private:
  absl::Status CheckSyntax(const std::string& path) const;
  bool Inside(const std::string& canonical) const;
  std::vector<std::string> roots_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_DATA_ROOTS_H_
