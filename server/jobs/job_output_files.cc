// JobOutput's server-written files (job_output.h): the output paths checked and the inputs
// protected at the load, the progressive frame file laid out, finished and committed with
// the model beside its digest.
#include "server/jobs/job_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/frame/frame_writer.h"
#include "server/jobs/job_types.h"
#include "server/jobs/output_files.h"
#include "server/platform/content_id.h"

namespace spexd::server {
namespace {

// SHA-256 of the file open at `fd`, read in blocks from its start.
absl::StatusOr<std::string> Sha256OfFile(int fd, const std::string& path) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  std::unique_ptr<char[]> block(new char[kBlock]);
  Sha256Stream sha;
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, block.get(), kBlock, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;
    sha.Update(absl::string_view(block.get(), static_cast<std::size_t>(n)));
    at += n;
  }
  return sha.HexDigest();
}

}  // namespace

void JobOutput::ProtectReadFiles(const std::vector<DataRoots::FileId>& read_files) {
  output_policy_.overwrite = request_.output.overwrite;
  // An existing file is compared at the commit (output_files.h), not refused here.
  output_policy_.keep_same = true;
  output_policy_.protected_ = read_files;
  // The PSF file, when it was loaded from a server path (its source is that path).
  const std::string& psf_source = request_.psf->source_name();
  if (!psf_source.empty() && psf_source[0] == '/') {
    const int fd = ::open(psf_source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0) {
      if (auto id = DataRoots::IdOf(fd); id.ok()) output_policy_.protected_.push_back(*id);
      ::close(fd);
    }
  }
}

absl::StatusOr<std::string> JobOutput::CheckOutputPath(const std::string& out) {
  SPEXD_ASSIGN_OR_RETURN(std::string canonical, env_.output_roots->CheckOutput(out, output_policy_));
  // The same PSF may have been loaded from elsewhere (an upload, another path) first:
  // a file to be replaced that holds exactly the PSF's bytes is that PSF too. A PSF is at
  // most max_upload_bytes (LoadPsf's bound); the file is hashed block by block, so a large
  // output being replaced costs one block of memory, not its size.
  if (output_policy_.overwrite) {
    auto existing = env_.output_roots->Open(out, env_.limits.max_upload_bytes);
    if (existing.ok()) {
      auto digest = Sha256OfFile(existing->fd(), out);
      if (digest.ok() && *digest == request_.psf_id) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output path '", out, "' holds the request's PSF: never overwritten"));
      }
    }
  }
  return canonical;
}

core::FrameMetadata JobOutput::FileMetadata() const {
  const core::Psf& psf = *request_.psf;
  const core::GridRequest& grid = RecordedGrid();
  core::FrameMetadata meta;
  meta.image_header = image_header_;
  meta.fibermap_fits = fibermap_fits_;
  meta.in_psf = request_.in_psf_name.empty() ? psf.source_name() : request_.in_psf_name;
  meta.in_img = in_img_;
  meta.orig_psf = psf.in_psf().value_or("");
  meta.wmin = grid.wmin;
  meta.wmax = grid.wmax;
  meta.dw = grid.dw;
  meta.heliocor = bary_.factor;
  meta.scores = request_.plan->params().scores;
  return meta;
}

absl::Status JobOutput::PrepareProgressiveFile(const std::vector<int>& bundles) {
  const core::PatchPlan& plan = geometry_->plan();
  std::vector<int> listed = ListedBundles(bundles);
  std::sort(listed.begin(), listed.end());
  if (listed.empty()) return absl::InvalidArgumentError("no bundle to write a frame file of");
  // Rows as the assembler stacks them: the listed bundles' fibres in bundle order (every
  // bundle is whole: nspec is a multiple of bundlesize, ExtractionParams).
  core::FrameFileShape shape;
  shape.specmin = plan.bundle_fiber_begin(listed.front());
  for (int b : listed) {
    file_row_[b] = shape.nspec;
    shape.nspec += plan.bundlesize;
  }
  shape.nwave = plan.nwave;
  shape.ndiag = plan.ndiag;
  shape.wave = bary_.factor != 1.0 ? bary_.wave : plan.wave;  // the recorded grid
  const OutputFile& out = request_.output.frame;
  auto file = env_.output_roots->CreateOutput(out.path, output_policy_);
  if (!file.ok()) return file.status();
  frame_file_.emplace(*std::move(file));
  core::FitsWriteOptions options;
  options.pool = env_.decode_pool;  // as WriteFiles (and its pages faulted in here, ahead)
  options.image_buffers = env_.file_buffers;
  options.write_pool = env_.file_writes;
  SPEXD_ASSIGN_OR_RETURN(progressive_,
                         core::ProgressiveFrameFile::Create(shape, FileMetadata(), frame_file_->fd(),
                                                            out.path, options, /*keep_image=*/true,
                                                            out.gzip));
  row_writer_ = std::make_unique<core::FileRowWriter>(progressive_.get(), env_.decode_pool);
  return absl::OkStatus();
}

absl::Status JobOutput::FinishProgressiveFile(const core::Frame& frame) {
  StageLaps laps(*this);
  const absl::Status rows = row_writer_->Wait();
  laps.Lap("output_file_rows_wait");
  stages_["output_file_rows"] += row_writer_->seconds();
  SPEXD_RETURN_IF_ERROR(rows);
  // What is left to write (a .gz member, or the rows and headers the writer task has not
  // reached) is written in the commit's task, beside the file's digest (OutputFiles).
  const absl::Status finished = progressive_->Finish(frame, nullptr, /*write_rest=*/false);
  laps.Lap("output_file_finish");
  return finished;
}

absl::Status JobOutput::WriteFiles(const core::Frame& frame, v1::ExtractSummary* s) {
  const OutputTarget& out = request_.output;
  const core::FrameMetadata meta = FileMetadata();
  // Encoded on the host pool (the loaders' and CPU backends', core::ParallelFor: this
  // thread always takes part, busy threads only slow it down), not on this streaming
  // thread alone, where it takes ~0.3 s of one core per r frame.
  core::FitsWriteOptions write_options;
  write_options.pool = env_.decode_pool;
  // Staged, then committed together: a file already at a name is kept when it is the
  // same frame (a retry), and refuses the request with nothing written when it is not.
  const FileDigestKind digest = out.checksum;
  OutputFiles files(*env_.output_roots, output_policy_, metrics_, env_.decode_pool, digest);
  // The frame file's descriptor goes with `files`: its writer task stops before, should
  // the request end before the commit has written the rest.
  absl::Cleanup stop_writes = [this] {
    if (progressive_ != nullptr) progressive_->StopWrites();
  };
  if (progressive_ != nullptr) {
    SPEXD_RETURN_IF_ERROR(FinishProgressiveFile(frame));
    // Its bytes stay in memory (progressive_) for the hash and a comparison.
    files.StageWritten(out.frame, *std::move(frame_file_), progressive_->pieces(),
                       progressive_->stored_pieces(),
                       [file = progressive_.get()] { return file->WriteRest(); });
    frame_file_.reset();
  } else {
    SPEXD_ASSIGN_OR_RETURN(std::string fits, core::FrameToFits(frame, meta, write_options));
    SPEXD_RETURN_IF_ERROR(files.Stage(out.frame, std::move(fits)));
  }
  if (!out.model.path.empty()) {
    SPEXD_ASSIGN_OR_RETURN(std::string fits, core::ModelToFits(frame, meta, write_options));
    SPEXD_RETURN_IF_ERROR(files.Stage(out.model, std::move(fits)));
  }
  const absl::Status committed = files.CommitAll();
  stages_["output_file_commit"] += files.commit_seconds();
  stages_[absl::StrCat("output_file_", FileDigestName(digest))] += files.hash_seconds();
  SPEXD_RETURN_IF_ERROR(committed);
  const std::vector<OutputFiles::Written>& w = files.written();
  s->set_server_output_path(w[0].path);
  s->set_server_output_bytes(w[0].bytes);
  const bool crc = digest == FileDigestKind::kCrc32;
  *(crc ? s->mutable_server_output_crc32() : s->mutable_server_output_sha256()) = w[0].digest;
  if (w.size() > 1) {
    s->set_server_model_path(w[1].path);
    s->set_server_model_bytes(w[1].bytes);
    *(crc ? s->mutable_server_model_crc32() : s->mutable_server_model_sha256()) = w[1].digest;
  }
  return absl::OkStatus();
}

}  // namespace spexd::server
