// The server-side files of one job (server_output_path and server_model_path),
// from their bytes to their names, all or nothing where the files allow it: each file is
// staged (a temporary in its confined directory, written, its digest taken), then a file
// already at any of the names is compared with its new content (output_identity.h) before
// anything is renamed: the same frame is kept in place and named in the reply as it is on
// disk (a retried request gets the same answer), a different one refuses the request
// (ALREADY_EXISTS) with nothing written. Only then are the others committed.
#ifndef SPEXD_SERVER_OUTPUT_FILES_H_
#define SPEXD_SERVER_OUTPUT_FILES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/base/task_pool.h"
#include "server/platform/data_roots.h"
#include "server/platform/file_digest.h"
#include "server/jobs/job_metrics.h"

namespace spexd::server {

// One file the server writes: its requested path and whether it is stored gzip-compressed.
struct OutputFile {
  std::string path;  // empty: not written
  bool gzip = false;
};

class OutputFiles {
 public:
  // What the reply says of one file (the summary's server_output_* / server_model_*).
  struct Written {
    std::string path;  // canonical
    int64_t bytes = 0;
    std::string digest;  // hex, of the kind given to the constructor
    bool kept = false;  // already there, the same frame: left untouched
  };

  // `roots` and `metrics` outlive this object; `pool` (may be null) runs the digests
  // beside the writes and syncs (core::ParallelFor's rules). `digest`: the checksum the
  // reply gives of each file (ExtractHeader.output_checksum).
  OutputFiles(const DataRoots& roots, DataRoots::WritePolicy policy, JobMetrics& metrics,
              core::TaskPool* pool, FileDigestKind digest = FileDigestKind::kSha256);

  // Stages the FITS file `fits` at `file` (gzip-compressed when the file is): its temporary created and written, its digest
  // computed beside the write. Without overwrite the uncompressed bytes are held until
  // CommitAll, to compare a file found at the name with them.
  absl::Status Stage(const OutputFile& file, std::string fits);
  // Stages a file already written into `pending` (the progressive frame file): `pieces`,
  // its uncompressed FITS bytes in order (what a file found at the name is compared
  // with), and `stored`, the bytes written (the gzip member of a gzip file, else the same),
  // both borrowed until CommitAll returns; `stored` is hashed beside its commit.
  // `write` (if any) finishes writing `stored` into `pending`: CommitAll runs it just
  // before the commit, beside the digest, which reads the same bytes from memory (a
  // .gz member's write and its SHA-256 then take the time of the longer, not of both).
  void StageWritten(const OutputFile& file, DataRoots::PendingOutput pending,
                    std::vector<absl::string_view> pieces, std::vector<absl::string_view> stored,
                    std::function<absl::Status()> write = nullptr);

  // Decides on the files already at the names (kept, or the request refused with nothing
  // written), then commits the others. Once; the results are then in written().
  absl::Status CommitAll();
  const std::vector<Written>& written() const { return written_; }
  // Seconds CommitAll spent in the commits (fsync, rename, the directory's fsync) and in
  // the digests beside them, summed over the files: where a served frame's tail goes.
  double commit_seconds() const { return commit_seconds_; }
  double hash_seconds() const { return hash_seconds_; }

 private:
  struct File {
    File(const OutputFile& t, DataRoots::PendingOutput p)
        : requested(t.path), gzip(t.gzip), pending(std::move(p)) {}
    std::string requested;
    bool gzip;
    DataRoots::PendingOutput pending;
    std::string stored;  // the bytes on disk (Stage), or empty (StageWritten)
    std::string fits;    // the uncompressed FITS of a gzip file, held to compare
    std::vector<absl::string_view> pieces;  // the uncompressed FITS, as compared
    std::vector<absl::string_view> stored_pieces;  // the bytes written, as digested
    std::function<absl::Status()> write;  // StageWritten's: before the commit
    Written result;
  };
  // The check a PendingOutput runs on a file found at `f`'s name.
  DataRoots::PendingOutput::SameCheck SameAs(File& f);
  void Count(const File& f, const absl::Status& status);

  const DataRoots& roots_;
  DataRoots::WritePolicy policy_;
  JobMetrics& metrics_;
  core::TaskPool* pool_;
  FileDigestKind digest_;
  std::vector<std::unique_ptr<File>> files_;  // (the views point into them: never moved)
  std::vector<Written> written_;
  double commit_seconds_ = 0, hash_seconds_ = 0;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_OUTPUT_FILES_H_
