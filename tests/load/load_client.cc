// One client process of the load and soak test (tests/load/soak.py): repeats remote
// extractions for a while over one connection, as `spexctl extract --server` does them
// (client::ExtractRemote, then the frame file bytes), and compares every result with the
// file of a local extraction of the same input. Prints one line per call:
//   <seconds since start> <call latency s> <outcome>
// It stops after --seconds or after --count calls, whichever comes first.
// where outcome is "ok", "mismatch", or the gRPC code name and message of the error.
//
// usage: spexd_load_client --seconds S [--count N] --inputs A,B,.. --references RA,RB,.. --first K
//                          -- <spexctl extract flags without -i/-o>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/spexctl/cli_args.h"
#include "client/spexctl/extract_flags.h"
#include "client/spexctl/remote_extract.h"
#include "client/spexctl/remote_flags.h"
#include "client/lib/spexd_client.h"
#include "core/frame/frame_writer.h"
#include "tests/load/fits_records.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::string bytes;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  }
  return bytes;
}

int Run(int argc, char** argv) {
  using namespace spexd::client;
  double seconds = 10;
  int first = 0, count = 1 << 30;
  std::vector<std::string> inputs, references, rest;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      rest.assign(argv + i + 1, argv + argc);
      break;
    }
    if (i + 1 >= argc) return 2;
    const std::string v = argv[++i];
    if (a == "--seconds" && !absl::SimpleAtod(v, &seconds)) return 2;
    if (a == "--first" && !absl::SimpleAtoi(v, &first)) return 2;
    if (a == "--count" && !absl::SimpleAtoi(v, &count)) return 2;
    if (a == "--inputs") inputs = absl::StrSplit(v, ',');
    if (a == "--references") references = absl::StrSplit(v, ',');
  }
  if (inputs.empty() || inputs.size() != references.size()) {
    std::fprintf(stderr, "load_client: --inputs and --references must pair up\n");
    return 2;
  }
  std::vector<std::string> expected;
  for (const auto& r : references) expected.push_back(ReadFile(r));
  rest.insert(rest.end(), {"-i", inputs[0], "-o", "/dev/null"});
  auto parsed = ParseArgs(
      JoinFlagSpecs({&ExtractFlagSpecs(), &RemoteExtractFlagSpecs(), &ConnectionFlagSpecs()}),
      rest);
  if (!parsed.ok()) {
    std::fprintf(stderr, "load_client: %s\n", parsed.status().ToString().c_str());
    return 2;
  }
  auto cmd = ParseExtractCommand(*parsed);
  auto options = RemoteExtractOptionsFromArgs(*parsed);
  if (!cmd.ok() || !options.ok()) {
    std::fprintf(stderr, "load_client: bad extract flags\n");
    return 2;
  }
  auto client = SpexdClient::Create(options->client);
  if (!client.ok()) {
    std::fprintf(stderr, "load_client: %s\n", client.status().ToString().c_str());
    return 1;
  }
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(seconds));
  for (int n = 0; n < count && Clock::now() < stop; ++n) {
    const std::size_t k = static_cast<std::size_t>(first + n) % inputs.size();
    cmd->input = inputs[k];
    const auto t0 = Clock::now();
    auto result = ExtractRemote(**client, *cmd, *options);
    std::string outcome;
    if (!result.ok()) {
      outcome = result.status().ToString();
    } else {
      auto bytes = spexd::core::FrameToFits(result->frame, result->meta);
      outcome = bytes.ok() && spexd::testing::SameFitsRecords(*bytes, expected[k]) ? "ok"
                                                                                   : "mismatch";
    }
    const auto t1 = Clock::now();
    for (char& ch : outcome) {
      if (ch == '\n') ch = ' ';
    }
    std::printf("%.3f %.4f %s\n", std::chrono::duration<double>(t1 - start).count(),
                std::chrono::duration<double>(t1 - t0).count(), outcome.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
