// libFuzzer target: the --config file parser (server/platform/config_file.cc).
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/platform/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto args = spexd::server::ConfigTextToArgs(text, "fuzz.conf");
  if (args.ok()) {
    for (const std::string& arg : *args) {
      if (arg.rfind("--", 0) != 0) __builtin_trap();  // every result is a flag
    }
  }
  return 0;
}
