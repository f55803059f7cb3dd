// libFuzzer target: `spexctl exposure`'s frame list (client/spexctl/remote_exposure.h,
// ParseFrameList), then the server's checks of the ExposureRequest the client would send.
// The input's first line is the command line's frame flags (applied to every frame), the
// rest the frame list. Every input must give entries or an error naming FILE:LINE: never a
// crash, UB or a hang; and an accepted list holds what the server needs to take the
// exposure whole (server/jobs/exposure_job.h, CheckExposureRequest): one entry per line,
// in order, each with an input, a PSF and an output, no output twice. Each frame then goes
// through the server's checks of a header alone (CheckHeaderFields, DecodeRequest); a
// frame they refuse is that frame's result, not an error here.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/spexctl/remote_exposure.h"
#include "server/rpc/request_decode.h"
#include "server/jobs/service_limits.h"

namespace {

// A fibermap flag makes the parser read that file; a fuzzed path could name a FIFO or
// /dev/zero. Such inputs are skipped: the file reader has its own targets.
bool NamesAFile(const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) {
    if (t == "-f" || absl::StartsWith(t, "--fibermap")) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t eol = input.find('\n');
  const std::string first = input.substr(0, eol);
  const std::string list = eol == std::string::npos ? "" : input.substr(eol + 1);
  const std::vector<std::string> common =
      absl::StrSplit(first, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  const std::vector<std::string> all =
      absl::StrSplit(input, absl::ByAnyChar(" \t\n\r\v\f"), absl::SkipEmpty());
  if (NamesAFile(all)) return 0;

  auto entries = spexd::client::ParseFrameList(list, "frames.txt", common);
  if (!entries.ok()) {
    if (entries.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  if (entries->empty()) __builtin_trap();  // an empty list is an error, not zero frames
  if (entries->back().line > 1 + static_cast<int>(std::count(list.begin(), list.end(), '\n'))) {
    __builtin_trap();
  }
  std::vector<spexd::v1::ExtractHeader> frames;
  int last_line = 0;
  std::set<std::string> outputs;
  for (const spexd::client::ExposureEntry& e : *entries) {
    if (e.line <= last_line) __builtin_trap();  // one entry per line, in order
    last_line = e.line;
    const spexd::v1::ExtractHeader& h = e.header;
    if (h.image_case() != spexd::v1::ExtractHeader::kServerPath || h.server_path().empty() ||
        h.server_output_path().empty() || e.psf.empty() || h.has_cuda_output() ||
        h.want_model() || h.bundles_size() > 0 || h.fibers_size() > 0) {
      __builtin_trap();
    }
    if (!outputs.insert(h.server_output_path()).second) __builtin_trap();
    spexd::v1::ExtractHeader sent = h;
    sent.set_psf_id(std::string(64, 'a'));  // RunExposure sets the loaded PSF's id
    frames.push_back(std::move(sent));
  }
  const spexd::server::ServiceLimits limits;
  for (const spexd::v1::ExtractHeader& h : frames) {
    if (!spexd::server::CheckHeaderFields(h).ok()) continue;
    (void)spexd::server::DecodeRequest(h, /*subset=*/false, limits);
  }
  return 0;
}
