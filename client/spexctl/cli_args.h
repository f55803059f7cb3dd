// Minimal command-line parser for spexctl: desi_extract_spectra's short and long flag
// names (-i/--input, --mask-policy, ...) are not valid absl flag names.
#ifndef SPEXD_CLIENT_CLI_ARGS_H_
#define SPEXD_CLIENT_CLI_ARGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::client {

struct FlagSpec {
  FlagSpec(std::string name, char short_letter = 0, bool with_value = true,
           std::string help_text = "", std::string canonical = "")
      : long_name(std::move(name)),
        short_name(short_letter),
        takes_value(with_value),
        help(std::move(help_text)),
        alias_of(std::move(canonical)) {}

  std::string long_name;   // without dashes, e.g. "input"
  char short_name = 0;     // e.g. 'i', or 0
  bool takes_value = true;
  std::string help;
  // Set on a deprecated spelling: the canonical flag it stands for (docs/service.md,
  // "Option names"). Its value is stored under that name; giving both is an error.
  std::string alias_of;
};

class ParsedArgs {
 public:
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  absl::StatusOr<int> GetInt(const std::string& name, int fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<FlagSpec>&,
                                              const std::vector<std::string>&);
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// Parses `args` (without the program/subcommand names). Unknown flags and missing
// values are INVALID_ARGUMENT with the flag named. A deprecated alias fills its
// canonical flag.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args);
std::string FormatHelp(const std::vector<FlagSpec>& specs);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_CLI_ARGS_H_
