// spexctl: command-line client of spexd. `spexctl extract --local` needs no server.
#include <cstdio>
#include <string>
#include <vector>

#include "client/spexctl/cli_args.h"
#include "client/spexctl/desispec_path_rule.h"
#include "client/spexctl/extract_flags.h"
#include "client/spexctl/huge_page_malloc.h"
#include "client/spexctl/local_extract.h"
#ifdef SPEXD_WITH_SERVER
#include "client/spexctl/remote_commands.h"
#include "client/spexctl/remote_exposure.h"
#include "client/spexctl/remote_extract.h"
#include "client/spexctl/remote_flags.h"
#endif
#include "core/base/allocator_settings.h"

namespace {

// To stderr with exit 2 after a wrong command line; to stdout with exit 0 for --help.
int Usage(bool asked = false) {
  std::fprintf(asked ? stdout : stderr,
               "usage: spexctl extract [flags]    extract a frame (--local, or --server host:port)\n"
               "       spexctl extract --help     list the flags\n"
#ifdef SPEXD_WITH_SERVER
               "       spexctl exposure --server ADDR FRAME_LIST   an exposure as one job (server paths)\n"
               "       spexctl psf load PATH [--server-path] | psf list | psf unload ID --server ADDR\n"
               "       spexctl health --server ADDR   grpc.health.v1 status (exit 0 when SERVING)\n"
               "       spexctl info --server ADDR     server version, backends, limits\n"
#endif
  );
  return asked ? 0 : 2;
}

// Flags of `spexctl extract`: the local ones plus, with the service built, the remote ones.
std::vector<spexd::client::FlagSpec> ExtractSpecs() {
#ifdef SPEXD_WITH_SERVER
  using namespace spexd::client;
  return JoinFlagSpecs({&ExtractFlagSpecs(), &RemoteExtractFlagSpecs(), &ConnectionFlagSpecs()});
#else
  return spexd::client::ExtractFlagSpecs();
#endif
}

int Extract(const std::vector<std::string>& args, char** argv) {
  using namespace spexd::client;
  const std::vector<FlagSpec> specs = ExtractSpecs();
  auto parsed = ParseArgs(specs, args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "spexctl extract: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  if (parsed->Has("help")) {
    std::printf("usage: spexctl extract -i PREPROC -p PSF -o FRAME [flags]\n%s",
                FormatHelp(specs).c_str());
    return 0;
  }
  // A frame the client writes from the server's stream passes through this process: its
  // heap is worth huge pages (a restart costs a process start, which a frame the server
  // writes would not earn back). Before the desispec path rule asks the CUDA driver for
  // its devices and before anything is said on stderr, so that neither happens twice.
  if (!parsed->Has("local") && parsed->Has("server") && !parsed->GetOr("output", "").empty()) {
    RestartWithHugePageMalloc(argv);
  }
  // desi_extract_spectra's drop-in: without --reproduce, the gpu_specter path desispec
  // would reproduce on this node, said on stderr.
  auto cmd = ParseExtractCommand(*parsed, DesispecPathRule);
  if (!cmd.ok()) {
    std::fprintf(stderr, "spexctl extract: %s\n", std::string(cmd.status().message()).c_str());
    return 2;
  }
  if (!cmd->quiet && !parsed->Has("reproduce")) {
    const bool gpu = cmd->params.compat == spexd::core::Compat::kGpu;
    std::fprintf(stderr,
                 "spexctl extract: reproducing gpu_specter's %s path, as desispec on this node "
                 "(%s)\n",
                 gpu ? "GPU" : "CPU", cmd->reproduce_why.c_str());
  }
  if (!cmd->local) {
#ifdef SPEXD_WITH_SERVER
    auto remote = RemoteExtractOptionsFromArgs(*parsed);
    if (!remote.ok()) {
      std::fprintf(stderr, "spexctl extract: %s\n", std::string(remote.status().message()).c_str());
      return 2;
    }
    absl::Status rs = RunRemoteExtract(*cmd, *remote);
    if (!rs.ok()) {
      std::fprintf(stderr, "spexctl extract: %s\n", rs.ToString().c_str());
      return 1;
    }
    return 0;
#else
    std::fprintf(stderr, "spexctl extract: --server is not available in this build\n");
    return 2;
#endif
  }
  absl::Status st = RunLocalExtract(*cmd);
  if (!st.ok()) {
    std::fprintf(stderr, "spexctl extract: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spexd::core::KeepFreedMemoryForReuse();
  if (argc < 2) return Usage();
  std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") return Usage(/*asked=*/true);
  std::vector<std::string> rest(argv + 2, argv + argc);
  if (sub == "extract") return Extract(rest, argv);
#ifdef SPEXD_WITH_SERVER
  if (sub == "exposure") return spexd::client::RunExposureCommand(rest);
  if (sub == "psf") return spexd::client::RunPsfCommand(rest);
  if (sub == "health") return spexd::client::RunHealthCommand(rest);
  if (sub == "info") return spexd::client::RunInfoCommand(rest);
#endif
  return Usage();
}
