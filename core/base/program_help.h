// --help for the programs built on Abseil flags. Debian 12's Abseil (20220623) exits with
// status 1 after printing the help, and its --help lists only the flags of a file named
// after the program (none of ours are); scripts and newcomers read a non-zero exit as a
// failure. Called before absl::ParseCommandLine, this prints the usage message and the
// flags itself and tells main to exit 0.
#ifndef SPEXD_CORE_BASE_PROGRAM_HELP_H_
#define SPEXD_CORE_BASE_PROGRAM_HELP_H_

#include <cstdio>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace spexd::core {

// Whether argv (before a "--") asks for help: --help, --helpshort, --helpfull (one or two
// dashes, with or without "=VALUE") or -h. If so, prints absl::ProgramUsageMessage() and the
// flags to `out` and returns true; main then returns 0. --help and --helpshort list the flags
// defined in the files `own_file` accepts (a flag's file as Abseil records it); --helpfull
// lists every flag linked in, Abseil's own included.
bool PrintHelpIfAsked(int argc, const char* const* argv,
                      absl::FunctionRef<bool(absl::string_view file)> own_file,
                      std::FILE* out = stdout);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_PROGRAM_HELP_H_
