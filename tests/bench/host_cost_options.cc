#include "tests/bench/host_cost_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spexd::bench {
namespace {

std::string Quote(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t'\"$\\;&|<>()*?") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

bool Parse(int argc, char** argv, Args* a) {
  std::vector<std::string> words;
  for (int i = 0; i < argc; ++i) words.push_back(Quote(argv[i]));
  a->command = absl::StrJoin(words, " ");
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "host_cost_bench: %s needs a value\n", k.c_str());
      return false;
    }
    const std::string v = argv[i + 1];
    if (k == "--backend") a->backend = v;
    else if (k == "--psf") a->psf = v;
    else if (k == "--frame") a->frame = v;
    else if (k == "--frame-gz") a->frame_gz = v;
    else if (k == "--arm") {
      const std::size_t eq = v.find('=');
      if (eq == std::string::npos) return false;
      a->arms.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (k == "--petals") a->petals = std::max(1, std::atoi(v.c_str()));
    else if (k == "--clients") a->clients = std::max(1, std::atoi(v.c_str()));
    else if (k == "--frames") a->frames = std::max(1, std::atoi(v.c_str()));
    else if (k == "--nspec") a->nspec = std::max(1, std::atoi(v.c_str()));
    else if (k == "--workers") a->workers = std::max(1, std::atoi(v.c_str()));
    else if (k == "--modes") a->modes = v;
    else if (k == "--work") a->work = v;
    else if (k == "--spexctl") a->spexctl = v;
    else if (k == "--device") a->device = v;
    else if (k == "--record") a->record = v;
    else if (k == "--replay-dir") a->replay_dir = v;
    else if (k == "--timed-marker") a->timed_marker = v;
    else if (k == "--shadow-parity-fraction") a->shadow_fraction = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "host_cost_bench: unknown option %s\n", k.c_str());
      return false;
    }
  }
  return true;
}

std::vector<Mode> AllModes() {
  std::vector<Mode> out;
  for (bool gz_in : {false, true}) {
    for (bool server : {false, true}) {
      for (bool gz_out : {false, true}) {
        out.push_back({absl::StrCat(gz_in ? "fitsgz" : "fits", "_to_", server ? "server" : "client", "_",
                                    gz_out ? "fitsgz" : "fits"),
                       gz_in, server, gz_out, false});
      }
    }
  }
  out.push_back({"exposure_fitsgz", true, true, true, true});
  out.push_back({"exposure_fits", false, true, false, true});
  return out;
}

}  // namespace spexd::bench
