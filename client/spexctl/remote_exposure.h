// spexctl exposure: an exposure (many frames, e.g. 30 cameras with 30 PSFs) submitted to
// a spexd server as one job (ExtractExposure, docs/service.md "Exposures"), from a frame
// list. Every frame is read from a server path and written by the server into its output
// roots, byte for byte the file `spexctl extract --server-path --server-output-path`
// writes for the same frame (but for the write time in the CHECKSUM/DATASUM comments).
//
// Frame list: one frame per line, "PREPROC PSF OUTPUT [FLAGS...]" (the first three
// columns of deploy/slurm's FRAME_LIST), whitespace-separated; blank lines and lines
// starting with '#' are skipped. FLAGS are `spexctl extract`'s extraction flags (-n, -w,
// -s, --nsubbundles, -f, --barycentric-correction, ...) and override, for that line, the
// ones given on the command line. A syntax error anywhere (fewer than three columns, an
// unknown flag or one a line may not set, a bad value, a repeated OUTPUT) refuses the
// whole list before anything is sent, naming FILE:LINE. What only the server can tell (a
// missing file, a path outside the roots, an existing output without --overwrite, a PSF
// that does not load) is that frame's result; the other frames go on.
#ifndef SPEXD_CLIENT_REMOTE_EXPOSURE_H_
#define SPEXD_CLIENT_REMOTE_EXPOSURE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/lib/spexd_client.h"
#include "client/spexctl/extract_flags.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::client {

struct ExposureEntry {
  int line = 0;  // in the frame list (1-based)
  std::string psf;  // server path of the PSF
  // server_path, server_output_path, params, in_img_name, in_psf_name, fibermap_fits;
  // psf_id is set by RunExposure once the PSF is loaded.
  v1::ExtractHeader header;
};

// Parses a frame list (`text`, named `name` in errors). `common` are the command line's
// extraction flags, applied to every line before the line's own; `default_path` decides
// the gpu_specter path of a line without --reproduce or --no-gpu (ParseExtractCommand).
absl::StatusOr<std::vector<ExposureEntry>> ParseFrameList(const std::string& text,
                                                          const std::string& name,
                                                          const std::vector<std::string>& common,
                                                          const DefaultPath& default_path = {});

struct ExposureOptions {
  v1::Priority priority = v1::REPROCESSING;
  bool overwrite = false;  // each frame's output may replace an existing file
  std::string tag;         // ExposureRequest.client_tag
  int psf_load_threads = 8;
};

struct ExposureOutcome {
  // One result per entry, in entry order (index = entry). A PSF that did not load gives
  // that entry's result here (its code and message) without sending it.
  std::vector<v1::ExposureFrameResult> frames;
  v1::ExposureSummary summary;  // over every entry, client-side failures included
};

// Loads every distinct PSF (server paths, concurrently), submits the entries whose PSF
// loaded as one ExtractExposure under client.options().extract_deadline_seconds, and
// calls `on_frame` (may be empty) with each result as it arrives. An error is the call's
// (refused request, cancel, deadline, server lost); frame failures are in the outcome.
absl::StatusOr<ExposureOutcome> RunExposure(
    SpexdClient& client, std::vector<ExposureEntry> entries, const ExposureOptions& options,
    const std::function<void(const v1::ExposureFrameResult&)>& on_frame);

// `spexctl exposure [flags] FRAME_LIST`: exit 0 when every frame was written, 1 when any
// failed (or the call did), 2 on a usage or frame-list error.
int RunExposureCommand(const std::vector<std::string>& args);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_REMOTE_EXPOSURE_H_
