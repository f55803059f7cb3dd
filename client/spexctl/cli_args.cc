#include "client/spexctl/cli_args.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace spexd::client {

std::optional<std::string> ParsedArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ParsedArgs::GetOr(const std::string& name, const std::string& fallback) const {
  auto v = Get(name);
  return v.has_value() ? *v : fallback;
}

absl::StatusOr<int> ParsedArgs::GetInt(const std::string& name, int fallback) const {
  auto v = Get(name);
  if (!v.has_value()) return fallback;
  int out = 0;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", *v, "' is not an integer"));
  }
  return out;
}

absl::StatusOr<double> ParsedArgs::GetDouble(const std::string& name, double fallback) const {
  auto v = Get(name);
  if (!v.has_value()) return fallback;
  double out = 0;
  if (!absl::SimpleAtod(*v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", *v, "' is not a number"));
  }
  return out;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args) {
  ParsedArgs out;
  std::map<std::string, std::string> given_as;  // canonical name -> the spelling used
  auto find = [&](const std::string& name, char short_name) -> const FlagSpec* {
    for (const auto& s : specs) {
      if ((!name.empty() && s.long_name == name) || (short_name != 0 && s.short_name == short_name)) {
        return &s;
      }
    }
    return nullptr;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') {
      out.positional_.push_back(a);
      continue;
    }
    const FlagSpec* spec = nullptr;
    std::optional<std::string> value;
    if (a[1] == '-') {
      std::string name = a.substr(2);
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      spec = find(name, 0);
      if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    } else {
      if (a.size() != 2) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
      spec = find("", a[1]);
      if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    }
    const std::string& key = spec->alias_of.empty() ? spec->long_name : spec->alias_of;
    auto [seen, first] = given_as.emplace(key, spec->long_name);
    if (!first && seen->second != spec->long_name) {
      return absl::InvalidArgumentError(absl::StrCat("--", seen->second, " and --", spec->long_name,
                                                     " are the same option: give one"));
    }
    if (spec->takes_value) {
      if (!value.has_value()) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrCat("flag --", spec->long_name, " needs a value"));
        }
        value = args[++i];
      }
      out.values_[key] = *value;
    } else {
      if (value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", spec->long_name, " takes no value"));
      }
      out.values_[key].assign(1, '1');  // not = "1": GCC 12 -Wrestrict false positive
    }
  }
  return out;
}

std::string FormatHelp(const std::vector<FlagSpec>& specs) {
  std::string out;
  for (const auto& s : specs) {
    std::string names = "  ";
    if (s.short_name != 0) {
      names.push_back('-');
      names.push_back(s.short_name);
      names.append(", ");
    } else {
      names.append("    ");
    }
    names.append("--").append(s.long_name);
    if (s.takes_value) names.append(" VALUE");
    while (names.size() < 32) names.push_back(' ');
    out.append(names).append(" ");
    if (s.alias_of.empty()) {
      out.append(s.help);
    } else {
      out.append("deprecated spelling of --").append(s.alias_of);
    }
    out.append("\n");
  }
  return out;
}

}  // namespace spexd::client
