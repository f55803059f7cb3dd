// Zero-copy GPU hand-off with spexd (docs/handoff.md): a producer process
// puts a frame on the GPU, registers it and an output buffer with a spexd on the same
// node and GPU, and receives the spectra in its own device memory. It checks them bit for
// bit against a path-based extraction of the same frame (the simulator's frame, written
// as a preproc file into the server's data root) and times both ways.
//
//   spexd --listen=unix:///tmp/spexd.sock --data_roots=/data --backend=cuda &
//   spexd-handoff-example --server=unix:///tmp/spexd.sock --psf=/data/psf.fits
//       --data_dir=/data/handoff [--fibers=0,500] [--repeat=5] [--refusals] [--json=out.json]
//       [--max_region_ratio=0.6]
//
// With --max_region_ratio=R it also fails unless the hand-off's median wall time per frame
// is at most R times the path's, both timed in this run
// (scripts/handoff_device.sh). It prints where the server's time went, stage by stage.
//
// Exit status: 0 all checks passed, 1 a check failed, 77 no CUDA device (skipped).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/spexctl/remote_frame.h"
#include "client/lib/spexd_client.h"
#include "core/frame/output_layout.h"
#include "core/base/program_help.h"
#include "core/io/psf.h"
#include "core/sim/simulator.h"

ABSL_FLAG(std::string, server, "unix:///tmp/spexd.sock", "spexd address on this node");
ABSL_FLAG(std::string, psf, "", "PSF file (a path inside the server's data roots)");
ABSL_FLAG(std::string, data_dir, "", "directory inside the server's data roots for the frame file");
ABSL_FLAG(std::string, fibers, "0,500", "first fibre and number of fibres to simulate and extract");
ABSL_FLAG(std::string, wave, "5760.0,7620.0,0.8", "wavelength grid wmin,wmax,dw");
ABSL_FLAG(int, device, 0, "CUDA device of the frame (the server's numbering)");
ABSL_FLAG(int, repeat, 5, "timed extractions each way");
ABSL_FLAG(bool, refusals, true, "also check the refusals that need a GPU");
ABSL_FLAG(std::string, json, "", "write the timings here as JSON");
ABSL_FLAG(bool, probe, false, "only report whether a CUDA device is visible (exit 0, or 77)");
ABSL_FLAG(double, max_region_ratio, 0,
          "fail unless the regions' median time per frame is at most this times the path's (0: no check)");

namespace {

using spexd::client::SpexdClient;
namespace v1 = spexd::v1;
namespace core = spexd::core;

#define CHECK_CUDA(expr)                                                                    \
  do {                                                                                      \
    const cudaError_t err_ = (expr);                                                        \
    if (err_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

uint64_t Align(uint64_t x) { return (x + 255) / 256 * 256; }

// One cudaMalloc allocation (IPC export needs cudaMalloc, not the stream-ordered pool).
class DeviceAllocation {
 public:
  explicit DeviceAllocation(std::size_t bytes) : bytes_(bytes) { CHECK_CUDA(cudaMalloc(&ptr_, bytes)); }
  ~DeviceAllocation() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  std::string IpcHandle() const {
    cudaIpcMemHandle_t h;
    CHECK_CUDA(cudaIpcGetMemHandle(&h, ptr_));
    return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

v1::RegisterCudaRegionRequest RegionRequest(const std::string& name, const std::string& handle, int device,
                                            uint64_t size) {
  v1::RegisterCudaRegionRequest r;
  r.set_name(name);
  r.set_ipc_handle(handle);
  r.set_device(device);
  r.set_size(static_cast<int64_t>(size));
  return r;
}

int failures = 0;
void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures;
}
void ExpectCode(const absl::Status& s, absl::StatusCode code, const std::string& what) {
  Check(s.code() == code, absl::StrCat(what, ": ", s.ok() ? "OK" : s.ToString()));
}

// The simulated frame's planes in one device allocation: image float32 | ivar float32 |
// mask int16, each 256-byte aligned.
struct FramePlanes {
  int height = 0, width = 0;
  uint64_t ivar_offset = 0, mask_offset = 0, bytes = 0;
};

FramePlanes PlanesFor(const core::SimFrame& f) {
  FramePlanes p;
  p.height = f.height;
  p.width = f.width;
  const uint64_t n = static_cast<uint64_t>(f.height) * f.width;
  p.ivar_offset = Align(n * 4);
  p.mask_offset = p.ivar_offset + Align(n * 4);
  p.bytes = p.mask_offset + Align(n * 2);
  return p;
}

v1::ExtractHeader BaseHeader(const std::string& psf_id, const std::vector<double>& wave, int fiber0,
                             int nfibers) {
  v1::ExtractHeader h;
  h.set_psf_id(psf_id);
  v1::ExtractionParams* p = h.mutable_params();
  p->set_wmin(wave[0]);
  p->set_wmax(wave[1]);
  p->set_dw(wave[2]);
  p->set_specmin(fiber0);
  p->set_nspec(nfibers);
  return h;
}

// Server-side times of the timed runs (ExtractSummary), for the breakdown: the summary's
// own fields and every stage_seconds entry (the backend's and the server's).
struct ServerTimes {
  std::map<std::string, std::vector<double>> values;
  void Add(const v1::ExtractSummary& s) {
    values["upload"].push_back(s.upload_seconds());
    values["queue"].push_back(s.queue_seconds());
    values["load"].push_back(s.load_seconds());
    values["extract"].push_back(s.extract_seconds());
    values["total"].push_back(s.total_seconds());
    for (const auto& [name, secs] : s.stage_seconds()) values[name].push_back(secs);
  }
  double Get(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? 0.0 : Median(it->second);
  }
};

// The medians of both ways, one row per time: where the server spends a frame's time.
// "unaccounted" is what total leaves after upload, queue, load, extract and output_tail
// (the time from the worker's end to the summary).
void PrintBreakdown(const ServerTimes& path, const ServerTimes& regions) {
  std::set<std::string> names;
  for (const auto* t : {&path, &regions}) {
    for (const auto& [name, v] : t->values) names.insert(name);
  }
  std::printf("server-side medians (s)              %10s %10s\n", "path", "regions");
  for (const std::string& name : names) {
    std::printf("  %-34s %10.4f %10.4f\n", name.c_str(), path.Get(name), regions.Get(name));
  }
  auto unaccounted = [](const ServerTimes& t) {
    return t.Get("total") - t.Get("upload") - t.Get("queue") - t.Get("load") - t.Get("extract") -
           t.Get("output_tail");
  };
  std::printf("  %-34s %10.4f %10.4f\n", "unaccounted", unaccounted(path), unaccounted(regions));
}

// A path extraction into a core::Frame (the reference), and its wall time.
absl::StatusOr<core::Frame> PathExtract(SpexdClient& client, const v1::ExtractHeader& h, double* seconds,
                                        v1::ExtractSummary* summary) {
  spexd::client::RemoteFrameBuilder builder;
  spexd::client::ExtractCallbacks cb;
  cb.on_header = [&](const v1::FrameHeader& fh) { return builder.OnHeader(fh); };
  cb.on_bundle = [&](v1::BundleData&& b) { return builder.OnBundle(std::move(b)); };
  cb.on_summary = [summary](const v1::ExtractSummary& s) { *summary = s; };
  const double t0 = Now();
  absl::Status s = client.Extract(h, nullptr, false, cb);
  if (!s.ok()) return s;
  auto frame = builder.Finish();
  *seconds = Now() - t0;
  return frame;
}

// A region extraction (results in the output region); the summary's load time too.
absl::Status RegionExtract(SpexdClient& client, const v1::ExtractHeader& h, double* seconds,
                           int* completions, v1::ExtractSummary* summary = nullptr) {
  spexd::client::ExtractCallbacks cb;
  *completions = 0;
  cb.on_summary = [summary](const v1::ExtractSummary& s) {
    if (summary != nullptr) *summary = s;
  };
  cb.on_header = [](const v1::FrameHeader&) { return absl::OkStatus(); };
  cb.on_bundle = [&](v1::BundleData&&) {
    ++*completions;
    return absl::OkStatus();
  };
  const double t0 = Now();
  absl::Status s = client.Extract(h, nullptr, false, cb);
  *seconds = Now() - t0;
  return s;
}

template <typename T>
bool SameBits(const std::vector<unsigned char>& host, uint64_t offset, const std::vector<T>& ref) {
  return std::memcmp(host.data() + offset, ref.data(), ref.size() * sizeof(T)) == 0;
}

}  // namespace

// Over 100 lines: an example, read top to bottom as the steps a pipeline takes (allocate,
// register, extract by path, extract through the regions, compare, time, unregister).
int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a CUDA producer that hands device frames to spexd (examples/cuda_handoff); "
      "exits 77 without a GPU");
  const auto own = [](absl::string_view file) { return absl::StrContains(file, "cuda_handoff"); };
  if (core::PrintHelpIfAsked(argc, argv, own)) return 0;
  absl::ParseCommandLine(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device visible; the hand-off needs a GPU shared with spexd\n");
    return 77;
  }
  if (absl::GetFlag(FLAGS_probe)) return 0;
  const int device = absl::GetFlag(FLAGS_device);
  CHECK_CUDA(cudaSetDevice(device));
  std::vector<int> fibers;
  for (auto part : absl::StrSplit(absl::GetFlag(FLAGS_fibers), ',')) fibers.push_back(std::stoi(std::string(part)));
  std::vector<double> wave;
  for (auto part : absl::StrSplit(absl::GetFlag(FLAGS_wave), ',')) wave.push_back(std::stod(std::string(part)));
  if (fibers.size() != 2 || wave.size() != 3 || absl::GetFlag(FLAGS_psf).empty() ||
      absl::GetFlag(FLAGS_data_dir).empty()) {
    std::fprintf(stderr, "need --psf, --data_dir, --fibers=f0,n and --wave=wmin,wmax,dw\n");
    return 2;
  }

  // 1. Simulate the frame (the project's simulator) and write it for the path reference.
  auto psf = core::Psf::Load(absl::GetFlag(FLAGS_psf));
  if (!psf.ok()) {
    std::fprintf(stderr, "%s\n", psf.status().ToString().c_str());
    return 1;
  }
  core::SimOptions sim;
  sim.fiber_begin = fibers[0];
  sim.nfibers = fibers[1];
  sim.wmin = wave[0];
  sim.wmax = wave[1];
  sim.dw = wave[2];
  sim.seed = 13;
  sim.num_hot_pixels = 200;  // masked pixels: the mask plane matters
  double t0 = Now();
  auto spectra = core::GenerateSpectra(sim);
  auto frame = spectra.ok() ? core::SimulateFrame(*psf, *spectra, sim) : spectra.status();
  if (!frame.ok()) {
    std::fprintf(stderr, "simulation: %s\n", frame.status().ToString().c_str());
    return 1;
  }
  const std::string frame_path = absl::StrCat(absl::GetFlag(FLAGS_data_dir), "/handoff-frame.fits");
  if (auto s = core::WritePreproc(frame_path, *psf, *spectra, *frame, sim); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("simulated %d fibres, %d x %d pixels in %.2f s\n", sim.nfibers, frame->height, frame->width,
              Now() - t0);

  // 2. Upload once into one cudaMalloc allocation.
  const FramePlanes planes = PlanesFor(*frame);
  const std::size_t npix = static_cast<std::size_t>(frame->height) * frame->width;
  DeviceAllocation input(planes.bytes);
  CHECK_CUDA(cudaMemcpy(input.get(), frame->image.data(), npix * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(input.get() + planes.ivar_offset, frame->ivar.data(), npix * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(input.get() + planes.mask_offset, frame->mask.data(), npix * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaDeviceSynchronize());  // the server reads it from another process

  spexd::client::ClientOptions copts;
  copts.target = absl::GetFlag(FLAGS_server);
  copts.call_deadline_seconds = 120;
  auto client = SpexdClient::Create(copts);
  if (!client.ok()) return 1;
  // spexd creates its CUDA workers during warm-up; wait until it serves (bounded).
  for (int i = 0; i < 600; ++i) {
    auto health = (*client)->CheckHealth();
    if (health.ok() && *health == "SERVING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto loaded = (*client)->LoadPsfFromServerPath(absl::GetFlag(FLAGS_psf));
  if (!loaded.ok()) {
    std::fprintf(stderr, "LoadPsf: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  v1::ExtractHeader base = BaseHeader(loaded->id(), wave, fibers[0], fibers[1]);

  // 3. The reference: by path (the server reads and decodes the file, results streamed).
  v1::ExtractHeader by_path = base;
  by_path.set_server_path(frame_path);
  std::vector<double> path_seconds;
  ServerTimes path_server, region_server;
  absl::StatusOr<core::Frame> reference;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeat) + 1; ++i) {  // the first run warms up
    double secs = 0;
    v1::ExtractSummary summary;
    reference = PathExtract(**client, by_path, &secs, &summary);
    if (!reference.ok()) {
      std::fprintf(stderr, "path extraction: %s\n", reference.status().ToString().c_str());
      return 1;
    }
    if (i > 0) {
      path_seconds.push_back(secs);
      path_server.Add(summary);
    }
  }

  // 4. Register the input and an output region sized by the documented layout.
  auto in_lease = (*client)->RegisterCudaRegion(RegionRequest("frame", input.IpcHandle(), device, planes.bytes));
  if (!in_lease.ok()) {
    std::fprintf(stderr, "RegisterCudaRegion: %s\n", in_lease.status().ToString().c_str());
    return 1;
  }
  const core::OutputLayout layout = core::MakeOutputLayout(reference->nspec, reference->nwave, reference->ndiag);
  DeviceAllocation output(layout.total_bytes);
  CHECK_CUDA(cudaMemset(output.get(), 0xA5, output.bytes()));  // untouched bytes would show
  CHECK_CUDA(cudaDeviceSynchronize());
  auto out_lease =
      (*client)->RegisterCudaRegion(RegionRequest("spectra", output.IpcHandle(), device, layout.total_bytes));
  if (!out_lease.ok()) {
    std::fprintf(stderr, "RegisterCudaRegion: %s\n", out_lease.status().ToString().c_str());
    return 1;
  }
  v1::ExtractHeader by_region = base;
  v1::CudaImage* ci = by_region.mutable_cuda_image();
  ci->mutable_image()->set_region_id((*in_lease)->id());
  ci->mutable_ivar()->set_region_id((*in_lease)->id());
  ci->mutable_ivar()->set_offset(static_cast<int64_t>(planes.ivar_offset));
  ci->mutable_mask()->set_region_id((*in_lease)->id());
  ci->mutable_mask()->set_offset(static_cast<int64_t>(planes.mask_offset));
  ci->set_height(planes.height);
  ci->set_width(planes.width);
  ci->set_pixel_type(v1::FLOAT32);
  by_region.mutable_cuda_output()->mutable_region()->set_region_id((*out_lease)->id());

  // 5. Extract by region; check the device output bit for bit after the first run.
  std::vector<double> region_seconds;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeat) + 1; ++i) {
    double secs = 0;
    int completions = 0;
    v1::ExtractSummary summary;
    absl::Status s = RegionExtract(**client, by_region, &secs, &completions, &summary);
    if (!s.ok()) {
      std::fprintf(stderr, "region extraction: %s\n", s.ToString().c_str());
      return 1;
    }
    if (i > 0) {
      region_seconds.push_back(secs);
      region_server.Add(summary);
    }
    if (i == 0) {
      std::vector<unsigned char> host(layout.total_bytes);
      CHECK_CUDA(cudaMemcpy(host.data(), output.get(), host.size(), cudaMemcpyDeviceToHost));
      Check(completions == static_cast<int>(reference->nspec / 25 + (reference->nspec % 25 != 0)),
            absl::StrCat("one completion per bundle (", completions, ")"));
      Check(SameBits(host, layout.flux, reference->flux), "flux bit-identical to the path extraction");
      Check(SameBits(host, layout.ivar, reference->ivar), "ivar bit-identical");
      Check(SameBits(host, layout.mask, reference->mask), "mask bit-identical");
      Check(SameBits(host, layout.resolution, reference->rdiags), "resolution bit-identical");
      Check(SameBits(host, layout.chi2pix, reference->chi2pix), "chi2pix bit-identical");
      double sum = 0;
      for (double f : reference->flux) sum += f;
      Check(sum > 0, "reference flux is not trivial");
    }
  }

  // 6. Refusals that need a GPU.
  if (absl::GetFlag(FLAGS_refusals)) {
    ExpectCode((*client)->RegisterCudaRegion(RegionRequest("other-gpu", input.IpcHandle(), devices, 1024)).status(),
               absl::StatusCode::kFailedPrecondition, "region on a GPU without a worker");
    ExpectCode((*client)
                   ->RegisterCudaRegion(RegionRequest("oversized", input.IpcHandle(), device, planes.bytes + (64 << 20)))
                   .status(),
               absl::StatusCode::kFailedPrecondition, "region larger than its allocation");
    std::string stale_handle;
    {
      DeviceAllocation gone(1 << 20);
      stale_handle = gone.IpcHandle();
    }
    ExpectCode((*client)->RegisterCudaRegion(RegionRequest("stale", stale_handle, device, 1 << 20)).status(),
               absl::StatusCode::kFailedPrecondition, "stale handle (freed memory)");
    DeviceAllocation tiny(4096);
    auto tiny_lease = (*client)->RegisterCudaRegion(RegionRequest("tiny", tiny.IpcHandle(), device, 4096));
    Check(tiny_lease.ok(), "a small region registers");
    if (tiny_lease.ok()) {
      v1::ExtractHeader h = by_region;
      h.mutable_cuda_output()->mutable_region()->set_region_id((*tiny_lease)->id());
      double secs = 0;
      int n = 0;
      ExpectCode(RegionExtract(**client, h, &secs, &n), absl::StatusCode::kFailedPrecondition,
                 "output region too small");
      h = by_region;
      h.mutable_cuda_image()->mutable_image()->set_region_id((*tiny_lease)->id());
      ExpectCode(RegionExtract(**client, h, &secs, &n), absl::StatusCode::kFailedPrecondition,
                 "input region too small");
      Check((*tiny_lease)->Release().ok(), "release the small region");
    }
  }

  Check((*in_lease)->Release().ok(), "unregister the input region");
  Check((*out_lease)->Release().ok(), "unregister the output region");
  {
    double secs = 0;
    int n = 0;
    ExpectCode(RegionExtract(**client, by_region, &secs, &n), absl::StatusCode::kFailedPrecondition,
               "extraction naming an unregistered region");
  }

  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  const double path_s = Median(path_seconds), region_s = Median(region_seconds);
  const double streamed_mb =
      static_cast<double>(layout.bins()) * static_cast<double>(4 * 8 + layout.ndiags() * 8 + 1) / 1e6;
  std::printf("%-34s %10s\n", "median wall time per frame", "seconds");
  std::printf("%-34s %10.4f\n", "path input, results streamed", path_s);
  std::printf("%-34s %10.4f\n", "CUDA regions in and out", region_s);
  std::printf("%-34s %10.4f (%.1f %%)\n", "saved", path_s - region_s, 100 * (path_s - region_s) / path_s);
  PrintBreakdown(path_server, region_server);
  const double max_ratio = absl::GetFlag(FLAGS_max_region_ratio);
  if (max_ratio > 0) {
    Check(path_s > 0 && region_s <= max_ratio * path_s,
          absl::StrFormat("regions in and out take %.3f of the path's time per frame (at most %.2f)",
                          path_s > 0 ? region_s / path_s : 0.0, max_ratio));
  }
  const std::string json = absl::StrFormat(
      "{\"device\": \"%s\", \"fibres\": %d, \"nwave\": %d, \"repeat\": %d, \"path_s\": %.5f, "
      "\"region_s\": %.5f, \"region_server_total_s\": %.5f, \"region_extract_s\": %.5f, "
      "\"region_output_copies_s\": %.5f, \"region_output_specmask_s\": %.5f, \"streamed_mb\": %.1f, "
      "\"failures\": %d}\n",
      prop.name, reference->nspec, reference->nwave, static_cast<int>(path_seconds.size()), path_s,
      region_s, region_server.Get("total"), region_server.Get("extract"),
      region_server.Get("output_copies"), region_server.Get("output_specmask"), streamed_mb, failures);
  std::printf("%s", json.c_str());
  if (!absl::GetFlag(FLAGS_json).empty()) std::ofstream(absl::GetFlag(FLAGS_json)) << json;
  return failures == 0 ? 0 : 1;
}
