// Files for the tests of DataRoots and its pending outputs: a small file written, a
// directory's entries counted (what an output left behind).
#ifndef SPEXD_TESTS_SERVER_PLATFORM_SCRATCH_FILES_H_
#define SPEXD_TESTS_SERVER_PLATFORM_SCRATCH_FILES_H_

#include <filesystem>
#include <fstream>
#include <string>

namespace spexd::server {

inline void Touch(const std::string& path, const std::string& text = "data") {
  std::ofstream(path) << text;
}

inline int CountEntries(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.exists() ? 1 : 0;
  return n;
}

}  // namespace spexd::server

#endif  // SPEXD_TESTS_SERVER_PLATFORM_SCRATCH_FILES_H_
