// spexctl's server administration commands: psf load|list|unload, health, info.
#ifndef SPEXD_CLIENT_REMOTE_COMMANDS_H_
#define SPEXD_CLIENT_REMOTE_COMMANDS_H_

#include <string>
#include <vector>

namespace spexd::client {

// Each returns the process exit code (0 ok, 1 failure, 2 usage error) and prints to
// stdout (results) and stderr (errors).
int RunPsfCommand(const std::vector<std::string>& args);
int RunHealthCommand(const std::vector<std::string>& args);
int RunInfoCommand(const std::vector<std::string>& args);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_REMOTE_COMMANDS_H_
