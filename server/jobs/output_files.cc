#include "server/jobs/output_files.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/base/write_fully.h"
#include "core/frame/frame_writer.h"
#include "server/platform/log.h"
#include "server/jobs/output_identity.h"

namespace spexd::server {

OutputFiles::OutputFiles(const DataRoots& roots, DataRoots::WritePolicy policy,
                         JobMetrics& metrics, core::TaskPool* pool, FileDigestKind digest)
    : roots_(roots), policy_(std::move(policy)), metrics_(metrics), pool_(pool), digest_(digest) {
  policy_.keep_same = true;  // an existing file is decided on in CommitAll
}

absl::Status OutputFiles::Stage(const OutputFile& file, std::string fits) {
  const std::string& requested = file.path;
  const bool gz = file.gzip;
  std::string stored, held;
  if (gz) {
    SPEXD_ASSIGN_OR_RETURN(stored, core::GzipFitsBytes(fits, pool_));
    // The compressed bytes differ from write to write (the checksum dates): a file found
    // at a gzip file's name is compared inflated, with these (kept, not copied).
    if (!policy_.overwrite) held = std::move(fits);
  } else {
    stored = std::move(fits);
  }
  SPEXD_ASSIGN_OR_RETURN(DataRoots::PendingOutput pending,
                         roots_.CreateOutput(requested, policy_));
  auto f = std::make_unique<File>(file, std::move(pending));
  f->stored = std::move(stored);
  f->fits = std::move(held);
  f->stored_pieces = {absl::string_view(f->stored)};
  f->pieces = {gz ? absl::string_view(f->fits) : absl::string_view(f->stored)};
  f->result.bytes = static_cast<int64_t>(f->stored.size());
  // The digest (SHA-256: ~40 ms for an r frame, sequential by nature) beside the write.
  absl::Status wrote;
  core::ParallelFor(pool_, 2, 2, [&](int, int task) {
    if (task == 0) {
      wrote = core::WriteFully(f->pending.fd(), f->stored.data(), f->stored.size(), -1, requested);
    } else {
      f->result.digest = FileDigestHex(digest_, f->stored_pieces);
    }
  });
  SPEXD_RETURN_IF_ERROR(wrote);
  files_.push_back(std::move(f));
  return absl::OkStatus();
}

void OutputFiles::StageWritten(const OutputFile& file, DataRoots::PendingOutput pending,
                               std::vector<absl::string_view> pieces,
                               std::vector<absl::string_view> stored,
                               std::function<absl::Status()> write) {
  auto f = std::make_unique<File>(file, std::move(pending));
  f->pieces = std::move(pieces);
  f->stored_pieces = std::move(stored);
  f->write = std::move(write);
  for (absl::string_view p : f->stored_pieces) f->result.bytes += static_cast<int64_t>(p.size());
  files_.push_back(std::move(f));
}

DataRoots::PendingOutput::SameCheck OutputFiles::SameAs(File& f) {
  return [this, &f](int fd) -> absl::Status {
    auto existing = MatchExistingOutput(fd, f.pieces, f.requested, f.gzip, digest_);
    if (!existing.ok()) return existing.status();
    f.result.bytes = existing->bytes;
    f.result.digest = std::move(existing->digest);
    return absl::OkStatus();
  };
}

void OutputFiles::Count(const File& f, const absl::Status& status) {
  if (status.ok()) {
    metrics_.OutputFile(f.result.kept ? "kept_identical" : "written");
    if (f.result.kept) {
      Log(LogLevel::kInfo, "output_already_identical",
          {{"path", f.result.path}, {"bytes", f.result.bytes},
           {FileDigestName(digest_), f.result.digest}});
    }
  } else if (absl::IsAlreadyExists(status)) {
    metrics_.OutputFile("refused_different");
    Log(LogLevel::kInfo, "output_exists_different",
        {{"path", f.requested}, {"error", std::string(status.message())}});
  }
}

absl::Status OutputFiles::CommitAll() {
  // Two of them on one file (the directory resolved once, at CreateOutput) would have the
  // second rename replace the first: refused before any is committed.
  for (std::size_t i = 0; i < files_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (files_[i]->pending.canonical() == files_[j]->pending.canonical()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", files_[j]->requested, "' and '", files_[i]->requested, "' are the same file (",
            files_[i]->pending.canonical(), ")"));
      }
    }
  }
  // First every name that is taken, so that a different file anywhere refuses the request
  // before any rename: a new frame is not left beside a stale model.
  for (auto& f : files_) {
    auto kept = f->pending.KeepExisting(SameAs(*f));
    if (!kept.ok()) {
      Count(*f, kept.status());
      return kept.status();
    }
    f->result.kept = *kept;
    if (f->result.kept) {
      f->result.path = f->pending.canonical();
      Count(*f, absl::OkStatus());
    }
  }
  for (auto& f : files_) {
    if (f->result.kept) continue;
    absl::StatusOr<std::string> path = absl::InternalError("not committed");
    // A file found at the name by the commit (created meanwhile) and kept brings its own
    // digest through SameAs: decided here, not read while the commit may write it.
    const bool hash = f->result.digest.empty();
    std::string digest;
    // The progressive file's digest from its bytes in memory, beside the rest of its write,
    // the fsync and rename: reading 70 MB back would only add a pass over the page cache.
    double seconds[2] = {0, 0};
    core::ParallelFor(pool_, 2, 2, [&](int, int task) {
      const auto t0 = std::chrono::steady_clock::now();
      if (task == 0) {
        const absl::Status wrote = f->write ? f->write() : absl::OkStatus();
        path = wrote.ok() ? f->pending.Commit(SameAs(*f), &f->result.kept)
                          : absl::StatusOr<std::string>(wrote);
      } else if (hash) {
        digest = FileDigestHex(digest_, f->stored_pieces);
      }
      seconds[task] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    commit_seconds_ += seconds[0];
    hash_seconds_ += seconds[1];
    if (path.ok() && !f->result.kept && hash) f->result.digest = std::move(digest);
    if (path.ok()) f->result.path = *std::move(path);
    Count(*f, path.status());
    if (!path.ok()) return path.status();
  }
  for (auto& f : files_) written_.push_back(f->result);
  return absl::OkStatus();
}

}  // namespace spexd::server
