#include "client/spexctl/remote_extract.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/spexctl/output_paths.h"
#include "client/spexctl/progress_bar.h"
#include "client/spexctl/remote_flags.h"
#include "client/spexctl/remote_frame.h"
#include "client/spexctl/streamed_frame_file.h"
#include "core/frame/frame_writer.h"
#include "core/io/preproc.h"
#include "core/base/status_macros.h"
#include "proto/convert/extraction_params.h"

namespace spexd::client {
namespace {

absl::StatusOr<std::vector<int>> ParseIntList(const std::string& text, const char* flag) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", std::string(part),
                                                     "' is not an integer"));
    }
    out.push_back(v);
  }
  return out;
}

// "PATH SIZE bytes sha256 HEX", or "... crc32 HEX": whichever the server gave (a server
// older than output_checksum always gives SHA-256). PATH escaped (EscapeForLine): one
// line per file, whatever the name holds.
void PrintServerFile(const std::string& path, int64_t bytes, const std::string& sha256,
                     const std::string& crc32) {
  const bool crc = sha256.empty() && !crc32.empty();
  std::printf("%s %lld bytes %s %s\n", EscapeForLine(path).c_str(), static_cast<long long>(bytes),
              crc ? "crc32" : "sha256",
              EscapeForLine(crc ? crc32 : sha256).c_str());
}

// A server-written frame (no -o): what the server wrote, and where the time went.
absl::Status ReportServerFiles(const v1::ExtractSummary& s, const std::string& target,
                               double client_seconds) {
  PrintServerFile(s.server_output_path(), s.server_output_bytes(), s.server_output_sha256(),
                  s.server_output_crc32());
  if (!s.server_model_path().empty()) {
    PrintServerFile(s.server_model_path(), s.server_model_bytes(), s.server_model_sha256(),
                    s.server_model_crc32());
  }
  std::fprintf(stderr,
               "spexctl: %d spectra written by %s: upload %.2f s, queue %.2f s, load %.2f s, "
               "extract %.2f s, server total %.2f s, client total %.2f s; patches %lld "
               "extracted, %lld failed\n",
               s.nfibers(), target.c_str(), s.upload_seconds(), s.queue_seconds(),
               s.load_seconds(), s.extract_seconds(), s.total_seconds(), client_seconds,
               static_cast<long long>(s.counts().extracted()),
               static_cast<long long>(s.counts().failed()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RemoteExtractOptions> RemoteExtractOptionsFromArgs(const ParsedArgs& args) {
  RemoteExtractOptions o;
  SPEXD_ASSIGN_OR_RETURN(o.client, ClientOptionsFromArgs(args));
  o.server_paths = args.Has("server-path");
  o.server_output = args.GetOr("server-output-path", "");
  o.server_overwrite = args.Has("server-overwrite");
  const std::string checksum = args.GetOr("server-checksum", "sha256");
  if (checksum == "crc32") {
    o.server_checksum = v1::FILE_CHECKSUM_CRC32;
  } else if (checksum != "sha256") {
    return absl::InvalidArgumentError(
        absl::StrCat("--server-checksum must be sha256 or crc32 (got '", checksum, "')"));
  }
  const std::string wire = args.GetOr("wire-precision", args.Has("snr") ? "float64" : "float32");
  if (wire == "float64") {
    o.precision = v1::ARRAY_FLOAT64;
  } else if (wire != "float32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--wire-precision must be float32 or float64 (got '", wire, "')"));
  }
  const std::string priority = args.GetOr("priority", "reprocessing");
  if (priority == "realtime") {
    o.priority = v1::REALTIME;
  } else if (priority != "reprocessing") {
    return absl::InvalidArgumentError(
        absl::StrCat("--priority must be realtime or reprocessing (got '", priority, "')"));
  }
  if (auto b = args.Get("bundles")) {
    SPEXD_ASSIGN_OR_RETURN(o.bundles, ParseIntList(*b, "bundles"));
  }
  if (auto f = args.Get("fibers")) {
    SPEXD_ASSIGN_OR_RETURN(o.fibers, ParseIntList(*f, "fibers"));
  }
  o.print_snr = args.Has("snr");
  return o;
}

namespace {

// The request for `cmd`: a frame the client writes (-o, spectra streamed at o.precision) or,
// without -o, one the server writes into its output roots (nothing streamed back).
absl::StatusOr<v1::ExtractHeader> RequestHeader(const ExtractCommand& cmd,
                                                const RemoteExtractOptions& o,
                                                const std::string& psf_id) {
  v1::ExtractHeader header;
  header.set_psf_id(psf_id);
  if (o.server_paths) header.set_server_path(cmd.input);
  *header.mutable_params() = wire::ParamsToProto(cmd.params);
  header.set_priority(o.priority);
  const bool file_only = cmd.output.empty();
  if (file_only && o.server_output.empty()) {
    return absl::InvalidArgumentError("missing -o/--output or --server-output");
  }
  header.set_server_output_path(o.server_output);
  header.set_overwrite(o.server_overwrite);
  header.set_output_checksum(o.server_checksum);
  if (file_only) {
    header.set_results_to_file_only(true);
    header.set_server_model_path(cmd.model);  // desispec's model file, written there
  } else {
    header.set_want_model(cmd.params.want_model);
    header.set_array_precision(o.precision);
  }
  for (int b : o.bundles) header.add_bundles(b);
  for (int f : o.fibers) header.add_fibers(f);
  header.set_in_img_name(cmd.input);
  header.set_in_psf_name(cmd.psf);
  if (!cmd.fibermap.empty()) {
    SPEXD_ASSIGN_OR_RETURN(std::string fibermap, core::ReadFibermapFile(cmd.fibermap));
    header.set_fibermap_fits(std::move(fibermap));
  }
  return header;
}

}  // namespace

bool WritesProgressively(const ExtractCommand& cmd) {
  // -m's model comes after the last bundle: it keeps the whole-file path. A .gz frame is
  // deflated chunk by chunk as its rows come (core::ProgressiveFrameFile's gzip).
  return !cmd.output.empty() && cmd.model.empty();
}

absl::StatusOr<RemoteResult> ExtractRemote(SpexdClient& client, const ExtractCommand& cmd,
                                           const RemoteExtractOptions& o, bool write_file) {
  std::string psf_bytes, image_bytes;
  if (!o.server_paths) {
    SPEXD_ASSIGN_OR_RETURN(psf_bytes, ReadWholeFile(cmd.psf, "PSF"));
    SPEXD_ASSIGN_OR_RETURN(image_bytes, ReadWholeFile(cmd.input, "input image"));
  }
  auto load_psf = [&]() {
    return o.server_paths ? client.LoadPsfFromServerPath(cmd.psf)
                          : client.LoadPsfFromBytes(psf_bytes, cmd.psf);
  };
  SPEXD_ASSIGN_OR_RETURN(v1::PsfInfo psf, load_psf());

  const bool file_only = cmd.output.empty();
  SPEXD_ASSIGN_OR_RETURN(v1::ExtractHeader header, RequestHeader(cmd, o, psf.id()));
  const bool subset = !o.bundles.empty() || !o.fibers.empty();

  const int max_tries = std::max(1, client.options().max_attempts);
  int psf_reloads = 0, restarts = 0;
  for (;;) {
    RemoteFrameBuilder builder;
    RemoteResult result;
    bool received = false;
    std::unique_ptr<ProgressBar> live_bar;
    // Per attempt: a frame restarted from scratch drops (and removes) the last one's file.
    std::unique_ptr<StreamedFrameFile> file;
    const bool scores_given = o.precision == v1::ARRAY_FLOAT32;
    if (write_file) {
      builder.SendBundlesTo(
          [&file](int row, std::shared_ptr<const core::BundleResult> b) {
            return file->AddBundle(row, std::move(b));
          },
          /*keep_spectra=*/o.print_snr,
          [&file](int row, std::shared_ptr<const core::Float32Rows> rows) {
            return file->AddRows(row, std::move(rows));
          });
    }
    ExtractCallbacks cb;
    cb.on_header = [&](const v1::FrameHeader& h) {
      received = true;
      live_bar = std::make_unique<ProgressBar>("extract", h.bundles_size(), !cmd.quiet);
      SPEXD_RETURN_IF_ERROR(builder.OnHeader(h));
      if (!write_file) return absl::OkStatus();
      core::FrameMetadata meta = builder.Metadata(cmd.psf, cmd.input);
      meta.scores = cmd.params.scores;
      SPEXD_ASSIGN_OR_RETURN(file, StreamedFrameFile::Create(cmd.output, h, std::move(meta),
                                                             scores_given, FileWriteOptions(cmd)));
      return absl::OkStatus();
    };
    int file_only_bundles = 0;
    cb.on_bundle = [&](v1::BundleData&& part) {
      const bool last = part.last_part();
      if (file_only) {  // progress only: the server writes the arrays
        if (last && live_bar != nullptr) live_bar->Update(++file_only_bundles);
        return absl::OkStatus();
      }
      SPEXD_RETURN_IF_ERROR(builder.OnBundle(std::move(part)));
      if (last && live_bar != nullptr) live_bar->Update(builder.bundles_done());
      return absl::OkStatus();
    };
    cb.on_model = [&](const v1::ModelChunk& c) { return builder.OnModel(c); };
    cb.on_products = [&](const v1::FrameProducts& p) { return builder.OnProducts(p); };
    cb.on_summary = [&](const v1::ExtractSummary& s) { result.summary = s; };
    absl::Status st = client.Extract(header, o.server_paths ? nullptr : &image_bytes, subset, cb);
    if (live_bar != nullptr) live_bar->Finish();
    // The PSF is not on the server that took the extraction: evicted since LoadPsf (another
    // client filled the cache), or, with several servers behind one round-robin target,
    // loaded on another one. Load it again and retry. Each retry loads it once more than
    // the last, so that loads and extraction do not stay in step with the rotation (with
    // two servers, one load per retry would always reach the other server).
    if (absl::IsNotFound(st) && !received && psf_reloads + 1 < max_tries) {
      ++psf_reloads;
      std::fprintf(stderr, "spexctl: PSF not on the server that took the extraction (%s); loading it again\n",
                   std::string(st.message()).c_str());
      for (int i = 0; i < psf_reloads; ++i) {
        SPEXD_ASSIGN_OR_RETURN(psf, load_psf());
      }
      header.set_psf_id(psf.id());
      continue;
    }
    // The server went away mid-stream (crash, node lost). The library retries UNAVAILABLE
    // only before any data arrived; a whole frame can start again from scratch here (the
    // builder is new each time), and round robin sends it to another server.
    if (absl::IsUnavailable(st) && received && restarts + 1 < max_tries) {
      ++restarts;
      std::fprintf(stderr, "spexctl: server lost mid-stream (%s); restarting the frame\n",
                   std::string(st.message()).c_str());
      continue;
    }
    SPEXD_RETURN_IF_ERROR(st);
    result.stream_end = std::chrono::steady_clock::now();
    if (file_only) return result;
    SPEXD_ASSIGN_OR_RETURN(result.frame, builder.Finish(cmd.params.mask_policy));
    result.meta = builder.Metadata(cmd.psf, cmd.input);
    result.meta.scores = cmd.params.scores;
    result.header = builder.header();
    if (file != nullptr) {
      // A float32 stream's scores are the server's (FrameProducts); a server that sent
      // float64 although float32 was asked for (an old one) leaves them to be computed
      // here, as FrameToFits would; else they were computed from the rows.
      std::vector<core::FrameScore> raw;
      if (scores_given && !builder.float32()) raw = core::RawScores(result.frame);
      const std::vector<core::FrameScore>* given =
          builder.float32() ? &builder.given_scores() : scores_given ? &raw : nullptr;
      SPEXD_RETURN_IF_ERROR(file->Commit(result.frame, given));
      result.file_written = true;
      const StreamedFrameFile::Times& t = file->times();
      result.file_times = absl::StrFormat(
          "rows %.3f s while streaming; after the stream: rows left %.3f s, MASK, SCORES and "
          "headers %.3f s, fsync and rename %.3f s",
          t.rows, t.rows_wait, t.finish, t.sync);
    }
    return result;
  }
}

std::vector<double> MedianSnrPerFiber(const core::Frame& f) {
  std::vector<double> out;
  std::vector<double> snr;
  for (int s = 0; s < f.nspec; ++s) {
    snr.clear();
    for (int w = 0; w < f.nwave; ++w) {
      const std::size_t i = static_cast<std::size_t>(s) * f.nwave + w;
      if (f.ivar[i] > 0) snr.push_back(f.flux[i] * std::sqrt(f.ivar[i]));
    }
    out.push_back(core::Median(snr));
  }
  return out;
}

absl::Status RunRemoteExtract(const ExtractCommand& cmd, const RemoteExtractOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  SPEXD_ASSIGN_OR_RETURN(std::unique_ptr<SpexdClient> client, SpexdClient::Create(o.client));
  const bool progressive = WritesProgressively(cmd);
  SPEXD_ASSIGN_OR_RETURN(RemoteResult r, ExtractRemote(*client, cmd, o, progressive));
  // client total: to the end of the stream; write: from there to the files in place.
  const auto t1 = r.stream_end;
  if (cmd.output.empty()) {
    return ReportServerFiles(r.summary, o.client.target,
                             std::chrono::duration<double>(t1 - t0).count());
  }
  const core::FitsWriteOptions write_options = FileWriteOptions(cmd);
  if (!r.file_written) {
    SPEXD_ASSIGN_OR_RETURN(std::string bytes, core::FrameToFits(r.frame, r.meta, write_options));
    SPEXD_RETURN_IF_ERROR(core::WriteFitsAtomically(cmd.output, bytes, cmd.threads));
  }
  if (!cmd.model.empty()) {
    SPEXD_ASSIGN_OR_RETURN(std::string model_bytes,
                           core::ModelToFits(r.frame, r.meta, write_options));
    SPEXD_RETURN_IF_ERROR(core::WriteFitsAtomically(cmd.model, model_bytes, cmd.threads));
  }
  const auto t2 = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  const v1::ExtractSummary& s = r.summary;
  std::fprintf(stderr,
               "spexctl: %d spectra x %d wavelengths on %s (%s): upload %.2f s, queue %.2f s, "
               "load %.2f s, extract %.2f s, server total %.2f s, client total %.2f s, write "
               "%.2f s (%s); patches %lld extracted, %lld skipped, %lld retried, %lld failed\n",
               r.frame.nspec, r.frame.nwave, o.client.target.c_str(), r.header.backend().c_str(),
               s.upload_seconds(), s.queue_seconds(), s.load_seconds(), s.extract_seconds(), s.total_seconds(),
               secs(t0, t1), secs(t1, t2), progressive ? "rows while streaming" : "whole file",
               static_cast<long long>(s.counts().extracted()),
               static_cast<long long>(s.counts().skipped()),
               static_cast<long long>(s.counts().retried()),
               static_cast<long long>(s.counts().failed()));
  if (cmd.verbose && r.file_written) {
    std::fprintf(stderr, "spexctl: %s: %s\n", cmd.output.c_str(), r.file_times.c_str());
  }
  if (s.has_qa()) {
    // The frame's numerical health (docs/operations.md).
    const v1::FrameQa& q = s.qa();
    std::fprintf(stderr,
                 "spexctl: qa request %llu: worst condition %.3g (bundle %d), %lld retried, %lld "
                 "failed patches; bins %lld: SOMEBADPIX %lld, ALLBADPIX %lld, BAD2DFIT %lld; median "
                 "chi2pix %.3f; shadow parity %s\n",
                 static_cast<unsigned long long>(q.request_id()), q.worst_condition(),
                 q.worst_condition_bundle(), static_cast<long long>(q.retried_patches()),
                 static_cast<long long>(q.failed_patches()), static_cast<long long>(q.bins()),
                 static_cast<long long>(q.somebadpix_bins()), static_cast<long long>(q.allbadpix_bins()),
                 static_cast<long long>(q.bad2dfit_bins()), q.median_chi2pix(),
                 q.shadow_parity().empty()
                     ? "not sampled"
                     : (q.shadow_parity() + " (bundle " + std::to_string(q.shadow_bundle()) + ")").c_str());
  }
  if (o.print_snr) {
    const std::vector<double> snr = MedianSnrPerFiber(r.frame);
    std::printf("fiber  median_snr\n");
    for (int i = 0; i < r.frame.nspec; ++i) {
      std::printf("%5d  %10.2f\n", r.frame.specmin + i, snr[static_cast<std::size_t>(i)]);
    }
  }
  return absl::OkStatus();
}

}  // namespace spexd::client
