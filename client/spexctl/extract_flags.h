// spexctl extract's flags (desi_extract_spectra names) -> core::ExtractionParams. Shared by
// the local and the remote (--server) modes so that both extract the same thing.
#ifndef SPEXD_CLIENT_EXTRACT_FLAGS_H_
#define SPEXD_CLIENT_EXTRACT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/spexctl/cli_args.h"
#include "core/backend/backend_options.h"
#include "core/frame/frame_writer.h"
#include "core/plan/extraction_params.h"

namespace spexd::client {

// Flag specs of `spexctl extract` (local and remote options together).
const std::vector<FlagSpec>& ExtractFlagSpecs();

struct ExtractCommand {
  std::string input, psf, output, model;
  std::string fibermap;  // -f/--fibermap: FIBERMAP from this file instead of the image's
  bool verbose = false;  // -v/--verbose
  core::ExtractionParams params;
  int threads = 0;
  core::BackendKind backend = core::BackendKind::kCpu;  // local mode
  bool local = false;
  std::string server;           // host:port or dns:///name:port for remote mode
  double deadline_seconds = 0;  // 0 = none
  bool quiet = false;
};

absl::StatusOr<ExtractCommand> ParseExtractCommand(const ParsedArgs& args);

// How the client writes its frame and model files: on up to 8 of this host's threads,
// fewer with --cpu-threads. After the extraction, writing them is the whole of the
// client's time.
core::FitsWriteOptions FileWriteOptions(const ExtractCommand& cmd);

// "wmin,wmax,dw" (desi_extract_spectra -w).
absl::Status ParseWavelength(const std::string& text, core::ExtractionParams* params);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_EXTRACT_FLAGS_H_
