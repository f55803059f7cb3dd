// The optional --config file: `key = value` lines that mirror the command-line flags
// (`#` starts a comment). Flags given on the command line override the file.
#ifndef SPEXD_SERVER_CONFIG_FILE_H_
#define SPEXD_SERVER_CONFIG_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::server {

// Parses the text of a config file into flag arguments ("--key=value"). Keys may use
// dashes or underscores; a leading "--" is accepted. INVALID_ARGUMENT names the line.
absl::StatusOr<std::vector<std::string>> ConfigTextToArgs(const std::string& text,
                                                          const std::string& name);
// A config file is a few dozen lines; one over this bound is not a config file.
inline constexpr int64_t kMaxConfigFileBytes = int64_t{1} << 20;
// Reads the file (a regular file of at most kMaxConfigFileBytes; a FIFO, directory or
// device is refused without blocking, small_file.h) and parses it as ConfigTextToArgs.
absl::StatusOr<std::vector<std::string>> ConfigFileToArgs(const std::string& path);

// Builds the argv to parse: argv[0], the config file's flags, then the original
// arguments (so that the command line wins). `config_path` is taken from --config=PATH
// or --config PATH in argv; empty when absent.
absl::StatusOr<std::vector<std::string>> MergeConfigArgs(int argc, char** argv);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_CONFIG_FILE_H_
