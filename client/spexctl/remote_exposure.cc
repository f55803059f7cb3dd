#include "client/spexctl/remote_exposure.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "client/spexctl/cli_args.h"
#include "client/spexctl/desispec_path_rule.h"
#include "client/spexctl/extract_flags.h"
#include "client/spexctl/output_paths.h"
#include "client/spexctl/remote_extract.h"
#include "client/spexctl/remote_flags.h"
#include "core/base/status_macros.h"
#include "core/io/preproc.h"
#include "proto/convert/extraction_params.h"

namespace spexd::client {
namespace {

// `spexctl extract` flags that make no sense per frame of an exposure: the columns, the
// client-written model, and where or how the client runs.
const std::set<std::string>& NotPerFrame() {
  static const std::set<std::string> kNames = {
      "input", "psf", "output", "model", "local", "server", "deadline", "backend",
      "cpu-threads", "threads", "help", "quiet", "verbose"};
  return kNames;
}

// The extraction flags a frame-list line (and the command line, for every frame) may set.
const std::vector<FlagSpec>& FrameFlagSpecs() {
  static const std::vector<FlagSpec> kSpecs = [] {
    std::vector<FlagSpec> out;
    for (const FlagSpec& s : ExtractFlagSpecs()) {
      const std::string& canonical = s.alias_of.empty() ? s.long_name : s.alias_of;
      if (NotPerFrame().count(canonical) == 0) out.push_back(s);
    }
    return out;
  }();
  return kSpecs;
}

// FrameFlagSpecs plus the columns (-i, -p, -o), for ParseExtractCommand.
const std::vector<FlagSpec>& FrameAndColumnSpecs() {
  static const std::vector<FlagSpec> kSpecs = [] {
    std::vector<FlagSpec> out = FrameFlagSpecs();
    for (const FlagSpec& s : ExtractFlagSpecs()) {
      if (s.long_name == "input" || s.long_name == "psf" || s.long_name == "output") out.push_back(s);
    }
    return out;
  }();
  return kSpecs;
}

// Flags of `spexctl exposure` itself.
const std::vector<FlagSpec>& ExposureOwnFlagSpecs() {
  static const std::vector<FlagSpec> kSpecs = {
      {"overwrite", 0, false, "let each frame replace an existing output file"},
      {"priority", 0, true, "realtime|reprocessing (default reprocessing)"},
      {"tag", 0, true, "client tag logged with the exposure"},
      {"help", 'h', false, "show this help"},
  };
  return kSpecs;
}

// The command line's frame flags as tokens again, to go in front of each line's.
std::vector<std::string> FrameTokens(const ParsedArgs& parsed) {
  std::vector<std::string> out;
  for (const FlagSpec& s : FrameFlagSpecs()) {
    if (!s.alias_of.empty() || !parsed.Has(s.long_name)) continue;  // aliases fill canonicals
    out.push_back("--" + s.long_name);
    if (s.takes_value) out.push_back(*parsed.Get(s.long_name));
  }
  return out;
}

v1::ExposureFrameResult ClientSideResult(int index, const ExposureEntry& e, const absl::Status& s) {
  v1::ExposureFrameResult r;
  r.set_index(index);
  r.set_code(static_cast<int>(s.code()));
  r.set_message(absl::StrCat("PSF ", e.psf, ": ", s.message()));
  r.set_server_path(e.header.server_path());
  r.set_server_output_path(e.header.server_output_path());
  return r;
}

}  // namespace

absl::StatusOr<std::vector<ExposureEntry>> ParseFrameList(const std::string& text,
                                                          const std::string& name,
                                                          const std::vector<std::string>& common,
                                                          const DefaultPath& default_path) {
  std::vector<ExposureEntry> entries;
  std::set<std::string> outputs;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto where = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", line_no, ": ", what));
    };
    std::vector<std::string> tokens = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (tokens.size() < 3) return where("expected PREPROC PSF OUTPUT [FLAGS...]");
    std::vector<std::string> own(tokens.begin() + 3, tokens.end());
    // The line's own flags alone first, so that an error names what the line got wrong.
    auto checked = ParseArgs(FrameFlagSpecs(), own);
    if (!checked.ok()) return where(checked.status().message());
    if (!checked->positional().empty()) {
      return where(absl::StrCat("unexpected '", checked->positional().front(),
                                "' after OUTPUT (flags only)"));
    }
    std::vector<std::string> args = common;
    args.insert(args.end(), own.begin(), own.end());
    args.insert(args.end(), {"-i", tokens[0], "-p", tokens[1], "-o", tokens[2]});
    auto parsed = ParseArgs(FrameAndColumnSpecs(), args);
    if (!parsed.ok()) return where(parsed.status().message());
    auto cmd = ParseExtractCommand(*parsed, default_path);
    if (!cmd.ok()) return where(cmd.status().message());
    // The file, not the spelling: `out//a.fits` and a symlinked directory name one output
    // (the server refuses such an exposure too, before any frame runs).
    if (!outputs.insert(OutputPathKey(cmd->output)).second) {
      return where(absl::StrCat("OUTPUT '", EscapeForLine(cmd->output),
                                "' is also an earlier line's (the same file)"));
    }
    ExposureEntry e;
    e.line = line_no;
    e.psf = cmd->psf;
    // As `spexctl extract --server-path` builds it (remote_extract.cc), so that the
    // server writes the same file.
    v1::ExtractHeader& h = e.header;
    h.set_server_path(cmd->input);
    h.set_server_output_path(cmd->output);
    // The exposure's lines show no checksum: the cheapest one (a frame's SHA-256 is
    // ~0.05 s of the server's CPU, and the last thing its result waits for).
    h.set_output_checksum(v1::FILE_CHECKSUM_CRC32);
    *h.mutable_params() = wire::ParamsToProto(cmd->params);
    h.set_in_img_name(cmd->input);
    h.set_in_psf_name(cmd->psf);
    if (!cmd->fibermap.empty()) {
      auto fibermap = core::ReadFibermapFile(cmd->fibermap);
      if (!fibermap.ok()) return where(fibermap.status().message());
      h.set_fibermap_fits(*std::move(fibermap));
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no frames"));
  return entries;
}

absl::StatusOr<ExposureOutcome> RunExposure(
    SpexdClient& client, std::vector<ExposureEntry> entries, const ExposureOptions& options,
    const std::function<void(const v1::ExposureFrameResult&)>& on_frame) {
  // Every distinct PSF once, several at a time (each LoadPsf reads and hashes its file).
  std::vector<std::string> psfs;
  std::map<std::string, std::size_t> psf_index;
  for (const ExposureEntry& e : entries) {
    if (psf_index.emplace(e.psf, psfs.size()).second) psfs.push_back(e.psf);
  }
  std::vector<absl::StatusOr<v1::PsfInfo>> loaded(psfs.size(), absl::UnknownError("not loaded"));
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> loaders;
  const std::size_t nthreads = std::min<std::size_t>(psfs.size(), std::max(1, options.psf_load_threads));
  for (std::size_t t = 0; t < nthreads; ++t) {
    loaders.emplace_back([&] {
      for (std::size_t i = next++; i < psfs.size(); i = next++) {
        loaded[i] = client.LoadPsfFromServerPath(psfs[i]);
      }
    });
  }
  for (std::thread& t : loaders) t.join();

  ExposureOutcome outcome;
  outcome.frames.resize(entries.size());
  absl::Mutex mu;  // on_frame and outcome from the reading thread and this one
  int succeeded = 0, reported = 0;
  auto record = [&](int entry, v1::ExposureFrameResult r) {
    r.set_index(entry);
    absl::MutexLock lock(&mu);
    ++reported;
    if (r.code() == 0) ++succeeded;
    if (on_frame) on_frame(r);
    outcome.frames[static_cast<std::size_t>(entry)] = std::move(r);
  };
  v1::ExposureRequest request;
  request.set_priority(options.priority);
  request.set_client_tag(options.tag);
  std::vector<int> entry_of;  // request frame -> entry
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& psf = loaded[psf_index[entries[i].psf]];
    if (!psf.ok()) {
      record(static_cast<int>(i), ClientSideResult(static_cast<int>(i), entries[i], psf.status()));
      continue;
    }
    entries[i].header.set_psf_id(psf->id());
    entries[i].header.set_overwrite(options.overwrite);
    *request.add_frames() = entries[i].header;
    entry_of.push_back(static_cast<int>(i));
  }
  if (request.frames_size() > 0) {
    auto summary = client.ExtractExposure(request, [&](const v1::ExposureFrameResult& r) {
      if (r.index() < 0 || r.index() >= static_cast<int>(entry_of.size())) {
        return absl::DataLossError(absl::StrCat("result for frame ", r.index(), " of ",
                                                entry_of.size()));
      }
      record(entry_of[static_cast<std::size_t>(r.index())], r);
      return absl::OkStatus();
    });
    if (!summary.ok()) return summary.status();
    outcome.summary.set_total_seconds(summary->total_seconds());
  }
  outcome.summary.set_frames(reported);
  outcome.summary.set_succeeded(succeeded);
  outcome.summary.set_failed(reported - succeeded);
  return outcome;
}

int RunExposureCommand(const std::vector<std::string>& args) {
  constexpr const char* kUsage =
      "spexctl exposure --server host:port [--deadline S] [--priority P] [--overwrite] "
      "[extraction flags for every frame] FRAME_LIST\n"
      "  FRAME_LIST: one frame per line, 'PREPROC PSF OUTPUT [extraction flags]' (server paths)";
  const std::vector<FlagSpec> specs =
      JoinFlagSpecs({&ExposureOwnFlagSpecs(), &FrameFlagSpecs(), &ConnectionFlagSpecs()});
  auto parsed = ParseArgs(specs, args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "spexctl exposure: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  if (parsed->Has("help")) {
    std::printf("usage: %s\n%s", kUsage, FormatHelp(specs).c_str());
    return 0;
  }
  auto usage_error = [](const absl::Status& s) {
    std::fprintf(stderr, "spexctl exposure: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  if (parsed->positional().size() != 1) {
    return usage_error(absl::InvalidArgumentError(absl::StrCat("expected one FRAME_LIST; usage: ", kUsage)));
  }
  const std::string list_path = parsed->positional().front();
  ExposureOptions options;
  options.overwrite = parsed->Has("overwrite");
  options.tag = parsed->GetOr("tag", "");
  const std::string priority = parsed->GetOr("priority", "reprocessing");
  if (priority == "realtime") {
    options.priority = v1::REALTIME;
  } else if (priority != "reprocessing") {
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("--priority must be realtime or reprocessing (got '", priority, "')")));
  }
  auto client_options = ClientOptionsFromArgs(*parsed);
  if (!client_options.ok()) return usage_error(client_options.status());
  auto text = ReadWholeFile(list_path, "frame list");
  if (!text.ok()) return usage_error(text.status());
  // As spexctl extract: without --reproduce, the path desispec would reproduce on this
  // node, decided once for every line that leaves it open, and said on stderr.
  std::optional<absl::StatusOr<PathChoice>> decided;
  auto entries = ParseFrameList(*text, list_path, FrameTokens(*parsed), [&decided] {
    if (!decided) decided = DesispecPathRule();
    return *decided;
  });
  if (!entries.ok()) return usage_error(entries.status());
  if (decided && decided->ok()) {
    std::fprintf(stderr, "spexctl exposure: reproducing gpu_specter's %s path, as desispec on "
                 "this node (%s), where a line does not say\n",
                 (*decided)->compat == core::Compat::kGpu ? "GPU" : "CPU", (*decided)->why.c_str());
  }
  auto client = SpexdClient::Create(*client_options);
  if (!client.ok()) {
    std::fprintf(stderr, "spexctl exposure: %s\n", client.status().ToString().c_str());
    return 1;
  }
  const std::vector<ExposureEntry>& list = *entries;
  const auto t0 = std::chrono::steady_clock::now();
  // One line per frame as it finishes: CODE, OUTPUT, then the server times or the error.
  auto outcome = RunExposure(**client, *entries, options, [&](const v1::ExposureFrameResult& r) {
    const int line = list[static_cast<std::size_t>(r.index())].line;
    const std::string code = absl::StatusCodeToString(static_cast<absl::StatusCode>(r.code()));
    if (r.code() == 0) {
      const v1::ExtractSummary& s = r.summary();
      std::printf("%s\t%s\tline %d: queue %.2f s, load %.2f s, extract %.2f s, total %.2f s\n",
                  code.c_str(), EscapeForLine(r.server_output_path()).c_str(), line,
                  s.queue_seconds(), s.load_seconds(), s.extract_seconds(), s.total_seconds());
    } else {
      std::printf("%s\t%s\tline %d: %s\n", code.c_str(),
                  EscapeForLine(r.server_output_path()).c_str(), line,
                  EscapeForLine(r.message()).c_str());
    }
    std::fflush(stdout);
  });
  if (!outcome.ok()) {
    std::fprintf(stderr, "spexctl exposure: %s\n", outcome.status().ToString().c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "spexctl exposure: %d frames, %d written, %d failed in %.2f s\n",
               outcome->summary.frames(), outcome->summary.succeeded(), outcome->summary.failed(),
               seconds);
  return outcome->summary.failed() == 0 ? 0 : 1;
}

}  // namespace spexd::client
