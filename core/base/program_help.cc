#include "core/base/program_help.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace spexd::core {
namespace {

enum class HelpKind { kNone, kOwn, kFull };

// The source tree's root as the compiler was given the paths (absolute, or relative to the
// build directory under ccache's base directory), without the leading '/' that Abseil drops
// from a flag's file name: this file's own path less "core/base/program_help.cc". The
// listing then names files from the root (server/main.cc).
absl::string_view SourceRoot() {
  absl::string_view self = __FILE__;
  while (absl::ConsumePrefix(&self, "/")) {
  }
  absl::string_view root = self;
  return absl::ConsumeSuffix(&root, "core/base/program_help.cc") ? root : absl::string_view();
}

HelpKind Asked(int argc, const char* const* argv) {
  HelpKind kind = HelpKind::kNone;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--") break;  // what follows is an argument, not a flag
    if (a == "-h") {
      kind = std::max(kind, HelpKind::kOwn);
      continue;
    }
    if (!absl::ConsumePrefix(&a, "--")) {
      if (!absl::ConsumePrefix(&a, "-")) continue;
    }
    a = a.substr(0, a.find('='));
    if (a == "help" || a == "helpshort") kind = std::max(kind, HelpKind::kOwn);
    if (a == "helpfull") kind = HelpKind::kFull;
  }
  return kind;
}

}  // namespace

bool PrintHelpIfAsked(int argc, const char* const* argv,
                      absl::FunctionRef<bool(absl::string_view file)> own_file,
                      std::FILE* out) {
  const HelpKind kind = Asked(argc, argv);
  if (kind == HelpKind::kNone) return false;
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired()) continue;
    if (kind == HelpKind::kOwn && !own_file(flag->Filename())) continue;
    flags.push_back(flag);
  }
  // By file, then by name: the same order on every run (the registry is a hash map).
  std::sort(flags.begin(), flags.end(), [](const auto* a, const auto* b) {
    const std::string fa = a->Filename(), fb = b->Filename();
    return fa != fb ? fa < fb : a->Name() < b->Name();
  });
  const std::string program = argc > 0 ? std::string(argv[0]) : std::string("program");
  std::fprintf(out, "%s: %s\n", program.substr(program.rfind('/') + 1).c_str(),
               std::string(absl::ProgramUsageMessage()).c_str());
  std::string file;
  for (const auto* flag : flags) {
    if (flag->Filename() != file) {
      file = flag->Filename();
      absl::string_view shown = file;
      absl::ConsumePrefix(&shown, SourceRoot());
      while (absl::ConsumePrefix(&shown, "../") || absl::ConsumePrefix(&shown, "./")) {
      }
      std::fprintf(out, "\n  Flags from %s:\n", std::string(shown).c_str());
    }
    const std::string help = absl::StrReplaceAll(flag->Help(), {{"\n", "\n      "}});
    std::string fallback = flag->DefaultValue();
    if (flag->IsOfType<std::string>()) fallback = "\"" + fallback + "\"";
    std::fprintf(out, "    --%s (%s); default: %s;\n", std::string(flag->Name()).c_str(),
                 help.c_str(), fallback.c_str());
  }
  if (kind == HelpKind::kOwn) std::fprintf(out, "\nTry --helpfull to see every flag linked in.\n");
  std::fflush(out);
  return true;
}

}  // namespace spexd::core
