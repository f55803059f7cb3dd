#include "tests/test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "core/sim/simulator.h"
#include "core/base/status_macros.h"

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

absl::StatusOr<std::vector<core::BundleResult>> ExtractBundles(core::Backend& backend,
                                                               const core::ExtractionJob& job) {
  std::vector<core::BundleResult> out;
  auto s = backend.Extract(job, [&](core::BundleResult&& r) {
    out.push_back(std::move(r));
    return absl::OkStatus();
  });
  if (!s.ok()) return s.status();
  return out;
}

absl::StatusOr<core::BackendOptions> CudaTestOptions() {
  core::BackendOptions options;
  options.kind = core::BackendKind::kCuda;
  // ctest names the build's module (tests/cuda/CMakeLists.txt); a device run may name another.
  if (const char* module = std::getenv("SPEXD_CUDA_MODULE")) options.cuda_module = module;
  return options;
}

std::string BundledPsfPath() { return TestDataPath("psf-r0-00051060.fits"); }

absl::StatusOr<std::shared_ptr<const core::Geometry>> SmallBundledGeometry() {
  SPEXD_ASSIGN_OR_RETURN(core::Psf psf, core::Psf::Load(BundledPsfPath()));
  core::ExtractionParams p;
  p.wmin = 6000.0;
  p.wmax = 6080.0;
  p.dw = 0.8;
  p.nspec = 50;
  return core::Geometry::Create(std::make_shared<const core::Psf>(std::move(psf)), p, 4128, 4114,
                                /*cache_spots=*/false);
}

std::shared_ptr<const core::Psf> LoadBundledPsf() {
  std::string path = SharedDataPath("psf/psf-r0-00051060.fits");
  if (path.empty()) path = BundledPsfPath();
  auto psf = core::Psf::Load(path);
  if (!psf.ok()) psf = core::Psf::Load("tests/data/psf-r0-00051060.fits");  // from the repo root
  if (!psf.ok()) return nullptr;
  return std::make_shared<const core::Psf>(std::move(psf).value());
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

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

core::PreprocImage Float32Planes(const core::PreprocImage& in, core::PlaneBufferPool* pool,
                                 bool* exact) {
  core::PreprocImage out;
  out.height = in.height;
  out.width = in.width;
  out.source_name = in.source_name;
  out.image32 = core::PlaneBuffer<float>::Make(in.image.size(), pool);
  out.ivar32 = core::PlaneBuffer<float>::Make(in.ivar.size(), pool);
  bool same = true;
  for (std::size_t i = 0; i < in.image.size(); ++i) {
    out.image32[i] = static_cast<float>(in.image[i]);
    out.ivar32[i] = static_cast<float>(in.ivar[i]);
    same &= static_cast<double>(out.image32[i]) == in.image[i] &&
            static_cast<double>(out.ivar32[i]) == in.ivar[i];
  }
  if (exact != nullptr) *exact = same;
  return out;
}

absl::StatusOr<core::PreprocImage> SimulatedImage(const core::Psf& psf,
                                                  const core::SimOptions& options) {
  SPEXD_ASSIGN_OR_RETURN(core::SimSpectra spectra, core::GenerateSpectra(options));
  SPEXD_ASSIGN_OR_RETURN(core::SimFrame frame, core::SimulateFrame(psf, spectra, options));
  return core::ToPreprocImage(frame);
}

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

RawHttpResult RawHttpExchange(int port, const std::string& request, double timeout_s,
                              std::size_t piece, int pause_ms) {
  RawHttpResult r;
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return r;
  }
  r.connected = true;
  const std::size_t step = piece > 0 ? piece : std::max<std::size_t>(request.size(), 1);
  for (std::size_t off = 0; off < request.size(); off += step) {
    if (off > 0 && pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    const std::size_t n = std::min(step, request.size() - off);
    if (::send(fd, request.data() + off, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) break;
  }
  const auto deadline = t0 + std::chrono::duration<double>(timeout_s);
  char buf[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    r.response.append(buf, static_cast<std::size_t>(n));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  return r;
}

int HttpStatusOf(const std::string& response) {
  int code = -1;
  if (response.rfind("HTTP/1.", 0) == 0 && response.size() >= 12) {
    code = std::atoi(response.substr(9, 3).c_str());
  }
  return code;
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) r.output += buf;
  r.status = pclose(pipe);
  return r;
}

}  // namespace spexd::testing
