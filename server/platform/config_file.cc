#include "server/platform/config_file.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "server/platform/small_file.h"

namespace spexd::server {

absl::StatusOr<std::vector<std::string>> ConfigTextToArgs(const std::string& text,
                                                          const std::string& name) {
  std::vector<std::string> args;
  int lineno = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++lineno;
    std::string line(raw);
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    absl::StripAsciiWhitespace(&line);
    if (line.empty()) continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", lineno, ": expected key = value, got '", line, "'"));
    }
    std::string key = line.substr(0, eq);
    std::string value = line.substr(eq + 1);
    absl::StripAsciiWhitespace(&key);
    absl::StripAsciiWhitespace(&value);
    if (absl::StartsWith(key, "--")) key.erase(0, 2);
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", lineno, ": empty key"));
    }
    if (key == "config") {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", lineno, ": config files do not nest"));
    }
    key = absl::StrReplaceAll(key, {{"-", "_"}});
    args.push_back(absl::StrCat("--", key, "=", value));
  }
  return args;
}

absl::StatusOr<std::vector<std::string>> ConfigFileToArgs(const std::string& path) {
  auto text = ReadSmallFile(path, kMaxConfigFileBytes, "config file");
  if (!text.ok()) return text.status();
  return ConfigTextToArgs(*text, path);
}

absl::StatusOr<std::vector<std::string>> MergeConfigArgs(int argc, char** argv) {
  std::vector<std::string> original(argv, argv + argc);
  std::string config;
  for (std::size_t i = 1; i < original.size(); ++i) {
    const std::string& a = original[i];
    if (a == "--") break;
    if (absl::StartsWith(a, "--config=")) {
      config = a.substr(9);
    } else if ((a == "--config" || a == "-config") && i + 1 < original.size()) {
      config = original[i + 1];
    } else if (absl::StartsWith(a, "-config=")) {
      config = a.substr(8);
    }
  }
  std::vector<std::string> merged;
  merged.push_back(original.empty() ? std::string("spexd") : original[0]);
  if (!config.empty()) {
    auto from_file = ConfigFileToArgs(config);
    if (!from_file.ok()) return from_file.status();
    merged.insert(merged.end(), from_file->begin(), from_file->end());
  }
  merged.insert(merged.end(), original.begin() + (original.empty() ? 0 : 1), original.end());
  return merged;
}

}  // namespace spexd::server
