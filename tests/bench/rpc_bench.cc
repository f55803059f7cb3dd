// Benchmark: what the service adds to an extraction. A simulated frame on disk (path
// input) is extracted (a) by the backend alone (Backend::Extract on the decoded image,
// warm geometry, a sink that drops the bundles), (a') by core::ExtractFrame (the same plus
// the host-side finalisation and frame assembly a local run does), (b) locally as
// `spexctl extract --local` would, minus the file write (read + decode + ExtractFrame),
// and (c) through an in-process spexd over loopback gRPC: server-side read and
// decode, extraction, every bundle streamed, and the client's frame rebuild (specmask
// included) -- one frame at a time (latency), then with K clients each sending frames
// back to back (throughput: the server decodes the next frame while the worker extracts).
// Inputs are built before any clock starts; each path is warmed up once; medians and p90
// of R repetitions go to stdout as JSON (summary on stderr).
//
//   spexd_rpc_bench [--fibers N (500)] [--repeats R (3)] [--threads T] [--backend cpu|cuda]
//                   [--inflight K (2)] [--prefetch P (2)] [--psf PSF.fits (the bundled one)]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/remote_frame.h"
#include "client/spexd_client.h"
#include "core/backend.h"
#include "core/extract_frame.h"
#include "core/geometry.h"
#include "core/preproc.h"
#include "core/psf.h"
#include "core/simulator.h"
#include "server/spexd_server.h"
#include "tests/test_support.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int fibers = 500;
  int repeats = 3;
  int threads = 0;
  int inflight = 2;
  int prefetch = 2;
  std::string backend = "cpu";
  std::string psf = spexd::testing::BundledPsfPath();
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--fibers") a.fibers = v;
    if (k == "--repeats") a.repeats = std::max(1, v);
    if (k == "--threads") a.threads = v;
    if (k == "--inflight") a.inflight = std::max(1, v);
    if (k == "--prefetch") a.prefetch = std::max(1, v);
    if (k == "--backend") a.backend = argv[i + 1];
    if (k == "--psf") a.psf = argv[i + 1];
  }
  return a;
}

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Stats {
  double median = 0, p90 = 0;
};

Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stats s;
  s.median = v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.p90 = v[std::min(v.size() - 1, static_cast<std::size_t>(0.9 * static_cast<double>(v.size())))];
  return s;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "rpc_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spexd;
  const Args args = Parse(argc, argv);
  const std::string psf_path = args.psf;
  auto psf_value = core::Psf::Load(psf_path);
  if (!psf_value.ok()) return Fail("psf", psf_value.status());
  auto psf = std::make_shared<const core::Psf>(*std::move(psf_value));

  // --- Input: a simulated r frame on disk, inside the server's data root.
  const std::string dir = testing::MakeTempDir();
  const std::string frame_path = dir + "/preproc.fits";
  {
    core::SimOptions sim;
    sim.nfibers = args.fibers;
    sim.seed = 11;
    auto spectra = core::GenerateSpectra(sim);
    if (!spectra.ok()) return Fail("spectra", spectra.status());
    auto frame = core::SimulateFrame(*psf, *spectra, sim);
    if (!frame.ok()) return Fail("simulate", frame.status());
    absl::Status st = core::WritePreproc(frame_path, *psf, *spectra, *frame, sim);
    if (!st.ok()) return Fail("write preproc", st);
  }
  core::ExtractionParams params;  // r grid 5760-7620, 0.8 (desi_proc's r camera)
  params.nspec = args.fibers;

  // --- (a) backend alone and (b) local read + extract.
  core::BackendOptions bopts;
  bopts.kind = args.backend;
  bopts.threads = args.threads;
  auto backend = core::CreateBackend(bopts);
  if (!backend.ok()) return Fail("backend", backend.status());
  std::vector<double> backend_s, frame_s, local_s, read_s;
  std::shared_ptr<const core::Geometry> geometry;
  for (int r = -1; r < args.repeats; ++r) {  // r = -1: warm-up (spots evaluated and kept)
    const auto t0 = Clock::now();
    auto image = core::ReadPreproc(frame_path, core::PreprocOptions{});
    if (!image.ok()) return Fail("read", image.status());
    const double read = Since(t0);
    if (geometry == nullptr) {
      auto g = core::Geometry::Create(psf, params, image->height, image->width, true);
      if (!g.ok()) return Fail("geometry", g.status());
      geometry = *g;
    }
    core::ExtractionJob job;
    job.geometry = geometry;
    job.image = &*image;
    job.psferr = core::EffectivePsfErr(params, *psf);
    const auto t1 = Clock::now();
    auto frame = core::ExtractFrame(**backend, job);
    if (!frame.ok()) return Fail("extract", frame.status());
    const double whole = Since(t1);
    const auto t2 = Clock::now();
    int received = 0;
    auto extracted = (*backend)->Extract(job, [&](core::BundleResult&&) {
      ++received;
      return absl::OkStatus();
    });
    if (!extracted.ok()) return Fail("extract", extracted.status());
    if (r >= 0) {
      backend_s.push_back(Since(t2));
      frame_s.push_back(whole);
      local_s.push_back(read + whole);
      read_s.push_back(read);
    }
  }

  // --- (c) through the service, path input, results streamed back.
  server::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.metrics_listen.clear();
  so.data_roots = {dir};
  so.backend = args.backend;
  so.cpu_threads = args.threads;
  so.prefetch = args.prefetch;
  auto srv = server::SpexdServer::Start(so);
  if (!srv.ok()) return Fail("server", srv.status());
  if (absl::Status st = (*srv)->WaitForWarmUp(absl::Seconds(60)); !st.ok()) return Fail("warm-up", st);
  client::ClientOptions co;
  co.target = absl::StrCat("127.0.0.1:", (*srv)->port());
  auto cli = client::SpexdClient::Create(co);
  if (!cli.ok()) return Fail("client", cli.status());
  auto psf_info = (*cli)->LoadPsfFromServerPath(psf_path);
  if (!psf_info.ok()) {  // the PSF is outside the data root: upload it instead
    std::ifstream in(psf_path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    psf_info = (*cli)->LoadPsfFromBytes(bytes, psf_path);
  }
  if (!psf_info.ok()) return Fail("load psf", psf_info.status());
  v1::ExtractHeader header;
  header.set_psf_id(psf_info->id());
  header.set_server_path(frame_path);
  header.mutable_params()->set_wmin(params.wmin);
  header.mutable_params()->set_wmax(params.wmax);
  header.mutable_params()->set_dw(params.dw);
  header.mutable_params()->set_nspec(params.nspec);
  // One extraction through the service, client-side rebuild included.
  auto remote_frame = [&](client::SpexdClient& c, v1::ExtractSummary* summary) -> absl::Status {
    client::RemoteFrameBuilder builder;
    client::ExtractCallbacks cb;
    cb.on_header = [&](const v1::FrameHeader& h) { return builder.OnHeader(h); };
    cb.on_bundle = [&](v1::BundleData&& b) { return builder.OnBundle(std::move(b)); };
    cb.on_summary = [&](const v1::ExtractSummary& s) { *summary = s; };
    absl::Status st = c.Extract(header, nullptr, false, cb);
    if (!st.ok()) return st;
    return builder.Finish().status();
  };
  std::vector<double> service_s, server_read_s, server_extract_s;
  for (int r = -1; r < args.repeats; ++r) {
    v1::ExtractSummary summary;
    const auto t0 = Clock::now();
    if (absl::Status st = remote_frame(**cli, &summary); !st.ok()) return Fail("remote extract", st);
    if (r >= 0) {
      service_s.push_back(Since(t0));
      server_read_s.push_back(summary.load_seconds());
      server_extract_s.push_back(summary.extract_seconds());
    }
  }
  // Throughput: K clients, each sending `repeats` frames back to back.
  std::vector<std::unique_ptr<client::SpexdClient>> clients;
  for (int k = 0; k < args.inflight; ++k) clients.push_back(*client::SpexdClient::Create(co));
  std::vector<absl::Status> results(args.inflight);
  std::vector<std::vector<v1::ExtractSummary>> summaries(args.inflight);
  const auto tp0 = Clock::now();
  {
    std::vector<std::thread> threads;
    for (int k = 0; k < args.inflight; ++k) {
      threads.emplace_back([&, k] {
        for (int r = 0; r < args.repeats && results[k].ok(); ++r) {
          v1::ExtractSummary summary;
          results[k] = remote_frame(*clients[k], &summary);
          summaries[k].push_back(summary);
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  std::vector<double> tp_load, tp_extract, tp_queue;
  for (const auto& list : summaries) {
    for (const auto& sm : list) {
      tp_load.push_back(sm.load_seconds());
      tp_extract.push_back(sm.extract_seconds());
      tp_queue.push_back(sm.queue_seconds());
    }
  }
  const double per_frame_inflight = Since(tp0) / (args.inflight * args.repeats);
  for (const absl::Status& st : results) {
    if (!st.ok()) return Fail("throughput run", st);
  }
  (*srv)->Drain(absl::Seconds(5));

  const Stats b = Summarise(backend_s), l = Summarise(local_s), s = Summarise(service_s);
  const Stats fr = Summarise(frame_s);
  const Stats rd = Summarise(read_s), srd = Summarise(server_read_s), sx = Summarise(server_extract_s);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::printf(
      "{\"bench\":\"rpc\",\"fibers\":%d,\"nwave\":%d,\"repeats\":%d,\"cpu\":\"%s\",\"cores\":%ld,"
      "\"host\":\"%s\",\"backend_s\":{\"median\":%.3f,\"p90\":%.3f},\"extract_frame_s\":{\"median\":%.3f},"
      "\"local_s\":{\"median\":%.3f,"
      "\"p90\":%.3f},\"read_s\":{\"median\":%.3f},\"service_s\":{\"median\":%.3f,\"p90\":%.3f},"
      "\"server_load_s\":{\"median\":%.3f},\"server_extract_s\":{\"median\":%.3f},"
      "\"overhead_vs_backend\":%.4f,\"overhead_vs_local\":%.4f,\"backend\":\"%s\","
      "\"inflight\":%d,\"service_per_frame_inflight_s\":%.3f,\"throughput_overhead_vs_backend\":%.4f}\n",
      args.fibers, geometry->plan().nwave, args.repeats, CpuModel().c_str(),
      sysconf(_SC_NPROCESSORS_ONLN), host, b.median, b.p90, fr.median, l.median, l.p90, rd.median, s.median,
      s.p90, srd.median, sx.median, s.median / b.median - 1, s.median / l.median - 1,
      args.backend.c_str(), args.inflight, per_frame_inflight, per_frame_inflight / b.median - 1);
  std::fprintf(stderr,
               "rpc_bench: %d fibres, %s: backend %.3f s (ExtractFrame %.3f s), local (read %.3f + "
               "ExtractFrame) %.3f s, "
               "service %.3f s (server load %.3f, extract %.3f) -> %+.1f%% vs backend, %+.1f%% vs "
               "local; %d in flight (prefetch %d): %.3f s per frame -> %+.1f%% vs backend (server "
               "load %.3f, extract %.3f, queue %.3f s)\n",
               args.fibers, args.backend.c_str(), b.median, fr.median, rd.median, l.median, s.median,
               srd.median, sx.median, 100 * (s.median / b.median - 1),
               100 * (s.median / l.median - 1), args.inflight, args.prefetch, per_frame_inflight,
               100 * (per_frame_inflight / b.median - 1), Summarise(tp_load).median,
               Summarise(tp_extract).median, Summarise(tp_queue).median);
  return 0;
}
