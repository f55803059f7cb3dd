// Confines request paths to configured roots: no `..`, and no symlink that leads outside
// a root, whether in the middle of the path or at its end. One instance holds the input
// roots (--data_roots, read only), another the roots that server-side output may be
// written under (--output_roots).
#ifndef SPEXD_SERVER_DATA_ROOTS_H_
#define SPEXD_SERVER_DATA_ROOTS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spexd::server {

class DataRoots {
 public:
  // Canonicalises the roots; each must be an existing directory. An empty list is
  // allowed and refuses every path (clients must upload). `flag` names the option the
  // roots come from, for messages.
  static absl::StatusOr<DataRoots> Create(const std::vector<std::string>& roots,
                                          const std::string& flag = "--data_roots");

  const std::vector<std::string>& roots() const { return roots_; }

  // For the output roots, at startup: in each root a probe file is created, written and
  // removed, so that a read-only mount, /proc or a directory the server may not write is
  // refused then (FAILED_PRECONDITION naming the root and the reason) rather than failing
  // every request later. A full filesystem (ENOSPC, EDQUOT) is not refused, only added to
  // `full_roots` (for a warning): it is writable again once space is freed.
  absl::Status CheckWritable(std::vector<std::string>* full_roots = nullptr) const;

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
  // The open never blocks: a FIFO or device is opened with O_NONBLOCK and refused.
  // INVALID_ARGUMENT for a malformed path (relative, `..`) or anything but a regular
  // file, PERMISSION_DENIED outside the roots, NOT_FOUND when missing,
  // RESOURCE_EXHAUSTED over the size limit.
  absl::StatusOr<OpenFile> Open(const std::string& path, int64_t max_bytes) const;

  // A file read through the policy: its canonical path and contents.
  struct File {
    std::string path;
    std::string bytes;
  };
  // Open, then read the whole file. Same errors.
  absl::StatusOr<File> ReadFile(const std::string& path, int64_t max_bytes) const;

  // Identity of a file that an output must never replace (a request's input, its PSF).
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
  };
  static absl::StatusOr<FileId> IdOf(int fd);
  struct WritePolicy {
    bool overwrite = false;          // replace an existing regular file
    // Without overwrite: an existing regular file is not refused by the checks but left
    // to the commit, which keeps it when it is the same output (PendingOutput::
    // KeepExisting: a retried request gets the same answer) and refuses it otherwise.
    bool keep_same = false;
    std::vector<FileId> protected_;  // never replaced, even with overwrite
  };
  // Checks an output path before any work: its directory must exist inside a root; an
  // existing file there is refused (ALREADY_EXISTS) unless `policy.overwrite` or
  // `policy.keep_same`, and always when it is not a regular file (PERMISSION_DENIED) or
  // is protected (INVALID_ARGUMENT). Returns the canonical path.
  absl::StatusOr<std::string> CheckOutput(const std::string& path, const WritePolicy& policy) const;
  // An output file being written (CreateOutput): a temporary in the confined directory,
  // unnamed (O_TMPFILE) where the filesystem allows, else hidden and named
  // (".<name>.tmp-<16 random hex digits>", O_EXCL, O_NOFOLLOW: core::CreateNamedTemporary).
  // Commit syncs it and gives it the output's name; dropped uncommitted (an error, a
  // cancelled job) it leaves nothing: the named temporary is removed, the unnamed one
  // never had a name, not even if the process dies (the progressive frame file lives for a
  // whole extraction).
  class PendingOutput {
   public:
    PendingOutput(PendingOutput&& other) noexcept;
    PendingOutput& operator=(PendingOutput&& other) noexcept;
    PendingOutput(const PendingOutput&) = delete;
    PendingOutput& operator=(const PendingOutput&) = delete;
    ~PendingOutput();
    int fd() const { return fd_; }  // open for writing until Commit or destruction
    bool named_temporary() const { return !tmp_.empty() && !unnamed_; }
    // Decides on a file already at the output's name: given a read-only descriptor of it
    // (opened on the confined directory, O_NOFOLLOW, a regular file), returns OK when it
    // is the output being written, ALREADY_EXISTS (or another error) when not.
    using SameCheck = std::function<absl::Status(int fd)>;
    // Without overwrite, whether a file already has the output's name and `same` accepts
    // it: then this output is dropped (nothing written, the file untouched) and true is
    // returned. False when no file has the name (Commit next). Otherwise `same`'s error;
    // PERMISSION_DENIED for a name that is not a regular file; ABORTED when the file is
    // replaced or changed (inode, size, mtime or ctime) while `same` reads it, or its
    // directory moved since it was opened, since the answer would then name something
    // else than what was compared.
    absl::StatusOr<bool> KeepExisting(const SameCheck& same);
    // fsync, then the name (only while the directory is where its canonical path says,
    // checked before and after the rename: else ABORTED, the reply naming no file that
    // does not hold it): renamed over the output (without overwrite: RENAME_NOREPLACE,
    // or link() where the filesystem lacks it, so a file created meanwhile is not
    // replaced: ALREADY_EXISTS, unless `same` is given and accepts it as KeepExisting
    // does, which sets *kept), and the directory synced. Returns the canonical path.
    // Once; on failure nothing is left.
    absl::StatusOr<std::string> Commit(const SameCheck& same = {}, bool* kept = nullptr);
    const std::string& canonical() const { return canonical_; }

   private:
    friend class DataRoots;
    PendingOutput() = default;
    void Release();
    // KeepExisting's check, leaving this output as it is.
    absl::StatusOr<bool> MatchExisting(const SameCheck& same) const;
    // Whether the directory written into is still the one its canonical path names (not
    // renamed, nor replaced by a symlink or another directory): the reply names that
    // path, which must hold the file. ABORTED otherwise, saying `what` happened meanwhile.
    absl::Status CheckDirectoryInPlace(absl::string_view what) const;
    int dirfd_ = -1, fd_ = -1;
    bool unnamed_ = false, overwrite_ = false;
    std::string path_, name_, canonical_;
    std::string tmp_;         // the temporary's name once it has one this output created
    std::string tmp_prefix_;  // ".<name>": its names are drawn from this
  };
  // Opens the output `path` under `policy` (as CheckOutput; the directory is opened once
  // and checked on its descriptor, so a symlink swapped in cannot redirect the write) and
  // creates its temporary. `unnamed_temporary` false: the named kind (tests; filesystems
  // without O_TMPFILE get it anyway). PERMISSION_DENIED when it cannot be created.
  absl::StatusOr<PendingOutput> CreateOutput(const std::string& path, const WritePolicy& policy,
                                             bool unnamed_temporary = true) const;
  // Writes `bytes` to `path` atomically under the same rules: CreateOutput, write, Commit.
  // Returns the canonical path.
  absl::StatusOr<std::string> WriteFile(const std::string& path, const std::string& bytes,
                                        const WritePolicy& policy) const;

 private:
  // Form (absolute, no NUL, no `..`), then the path as written must lie under a root
  // (lexically: `//` and `.` collapsed) before anything is looked up on disk, so that a
  // path outside answers PERMISSION_DENIED whether or not it exists.
  absl::Status CheckSyntax(const std::string& path) const;
  bool Inside(const std::string& canonical) const;
  absl::Status Outside(const std::string& path) const;
  // For a path that does not resolve (ENOENT, ENOTDIR): PERMISSION_DENIED when the place
  // it names lies outside the roots (a symlink inside a root pointing out), so a missing
  // and an existing target outside get the same answer; `missing` otherwise.
  absl::Status Missing(const std::string& path, absl::Status missing) const;
  // Opens the directory of an output path (descriptor-checked to lie inside a root)
  // and checks the existing entry against `policy`; returns the directory descriptor.
  absl::StatusOr<int> OpenOutputDir(const std::string& path, const WritePolicy& policy,
                                    std::string* name, std::string* canonical) const;
  std::vector<std::string> roots_;
  // The roots as configured (absolute, lexically normalised) next to their canonical
  // forms: a root given through a symlink still takes paths spelled through it.
  std::vector<std::string> lexical_roots_;
  std::string flag_ = "--data_roots";
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_DATA_ROOTS_H_
