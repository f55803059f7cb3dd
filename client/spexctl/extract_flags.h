// spexctl extract's flags (desi_extract_spectra names) -> core::ExtractionParams. Shared by
// the local and the remote (--server) modes so that both extract the same thing.
#ifndef SPEXD_CLIENT_EXTRACT_FLAGS_H_
#define SPEXD_CLIENT_EXTRACT_FLAGS_H_

#include <functional>
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

// Which gpu_specter path's results to reproduce (core::Compat), and why (for the line
// spexctl extract prints: the flag, or what the node's rule found).
struct PathChoice {
  core::Compat compat = core::Compat::kGpu;
  std::string why;
};
// Decides the path when neither --reproduce nor --no-gpu does (DesispecPathRule for
// `spexctl extract`, desispec_path_rule.h).
using DefaultPath = std::function<absl::StatusOr<PathChoice>()>;

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
  // How params.compat was decided: "--reproduce", "--no-gpu", the default path's reason,
  // or empty for spexctl's own default (gpu_specter's GPU path).
  std::string reproduce_why;
};

// The command of `args`. Without --reproduce or --no-gpu, `default_path` (when given)
// decides which gpu_specter path is reproduced; else gpu_specter's GPU path.
absl::StatusOr<ExtractCommand> ParseExtractCommand(const ParsedArgs& args,
                                                   const DefaultPath& default_path = {});

// How the client writes its frame and model files: on up to 8 of this host's threads,
// fewer with --cpu-threads. After the extraction, writing them is the whole of the
// client's time.
core::FitsWriteOptions FileWriteOptions(const ExtractCommand& cmd);

// "wmin,wmax,dw" (desi_extract_spectra -w).
absl::Status ParseWavelength(const std::string& text, core::ExtractionParams* params);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_EXTRACT_FLAGS_H_
