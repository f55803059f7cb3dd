#include "tests/test_support.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace spexd::testing {
namespace fs = std::filesystem;

std::string TestDataPath(const std::string& name) {
  return std::string(SPEXD_TEST_DATA_DIR) + "/" + name;
}

std::string SharedDataPath(const std::string& name) {
  const char* env = std::getenv("SPEXD_SHARED_DATA");
  fs::path root = env != nullptr ? fs::path(env) : fs::path(SPEXD_SHARED_DATA_DIR);
  fs::path p = root / name;
  if (!fs::exists(p)) return "";
  return p.string();
}

core::BackendOptions CudaOptionsFromEnv() {
  core::BackendOptions options;
  options.kind = "cuda";
  if (const char* v = std::getenv("SPEXD_CUDA_SOLVER")) options.cuda_solver = v;
  if (const char* v = std::getenv("SPEXD_CUDA_EIGEN")) options.cuda_eigen = v;
  if (const char* v = std::getenv("SPEXD_CUDA_STATS")) options.cuda_stats = std::string(v) == "1";
  return options;
}

std::string BundledPsfPath() { return TestDataPath("psf-r0-00051060.fits"); }

namespace {
std::mutex g_mu;
std::vector<fs::path>* g_dirs = nullptr;
void RemoveTempDirs() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_dirs == nullptr) return;
  for (const auto& d : *g_dirs) {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
}
}  // namespace

std::string MakeTempDir() {
  std::string tmpl = (fs::temp_directory_path() / "spexd-test-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  if (made == nullptr) return "";
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_dirs == nullptr) {
    g_dirs = new std::vector<fs::path>;
    std::atexit(RemoveTempDirs);
  }
  g_dirs->push_back(made);
  return made;
}

}  // namespace spexd::testing
