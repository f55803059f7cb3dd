#include "server/spexd_server.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/backend/cuda_module_loader.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/cpu/blas_core_type.h"
#include "core/io/plane_buffer.h"
#include "core/base/task_pool.h"
#include "server/rpc/admin_service.h"
#include "server/rpc/call_watchdog.h"
#include "server/rpc/cuda_regions_service.h"
#include "server/platform/data_roots.h"
#include "server/rpc/extraction_service.h"
#include "server/platform/listen_address.h"
#include "server/platform/log.h"
#include "server/platform/health_metrics.h"
#include "server/platform/metrics.h"
#include "server/platform/pem_check.h"
#include "server/platform/small_file.h"
#include "server/state/psf_cache.h"
#include "server/state/region_registry.h"
#include "server/state/scheduler.h"
#include "server/rpc/service_context.h"

namespace spexd::server {
namespace {

// A PEM file is a few kilobytes (a certificate chain, a CA bundle at most a few hundred).
constexpr int64_t kMaxPemFileBytes = int64_t{4} << 20;

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(const SecurityOptions& o) {
  if (o.tls_cert_file.empty() && o.tls_key_file.empty()) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls_cert and --tls_key");
  }
  SPEXD_ASSIGN_OR_RETURN(std::string cert, ReadSmallFile(o.tls_cert_file, kMaxPemFileBytes,
                                                         "--tls_cert"));
  SPEXD_ASSIGN_OR_RETURN(std::string key, ReadSmallFile(o.tls_key_file, kMaxPemFileBytes,
                                                        "--tls_key"));
  SPEXD_RETURN_IF_ERROR(CheckTlsPair(cert, o.tls_cert_file, key, o.tls_key_file));
  const bool mutual = !o.tls_client_ca_file.empty();
  grpc::SslServerCredentialsOptions ssl(
      mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (mutual) {
    SPEXD_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadSmallFile(o.tls_client_ca_file,
                                                             kMaxPemFileBytes, "--tls_client_ca"));
    SPEXD_RETURN_IF_ERROR(CheckTlsClientCa(ssl.pem_root_certs, o.tls_client_ca_file));
  }
  ssl.pem_key_cert_pairs.push_back({std::move(key), std::move(cert)});
  return grpc::SslServerCredentials(ssl);
}

struct WorkerBackend {
  std::unique_ptr<core::Backend> backend;
  int gpu_device = -1;
};

// One worker per GPU (all visible, or --gpu_devices) when the CUDA module finds devices;
// else one CPU worker. `reason` says which and why, for logs and GetServerInfo.
absl::StatusOr<std::vector<WorkerBackend>> ChooseBackends(const WorkerOptions& o,
                                                          core::TaskPool* pool, int* gpu_count,
                                                          std::string* reason) {
  std::vector<WorkerBackend> out;
  const std::string selected = absl::StrJoin(o.gpu_devices, ",");
  core::BackendOptions bo;
  bo.cuda_module = o.cuda_module;
  bo.cpu_test_faults = o.cpu_test_faults;
  // The host threads sleep while their GPU works: the cores go to the loads' inflate and
  // decode and the frame files' writes (core::CudaHostWait).
  bo.cuda_host_wait = core::CudaHostWait::kBlock;
  bo.threads = o.cpu_threads;
  bo.pool = pool;
  *gpu_count = 0;
  std::string why;
  if (o.backend != core::BackendKind::kCpu) {
    *gpu_count = core::CudaDeviceCount(bo, &why);
    if (*gpu_count > 0) {
      std::vector<int> devices = o.gpu_devices;
      if (devices.empty()) {
        for (int d = 0; d < *gpu_count; ++d) devices.push_back(d);
      }
      const int per_gpu =
          o.backends_per_gpu > 0 ? o.backends_per_gpu : WorkerOptions::kDefaultBackendsPerGpu;
      for (int d : devices) {
        if (d < 0 || d >= *gpu_count) {
          return absl::InvalidArgumentError(
              absl::StrCat("--gpu_devices: device ", d, " does not exist (", *gpu_count,
                           " visible: 0 to ", *gpu_count - 1, ")"));
        }
        bo.kind = core::BackendKind::kCuda;
        bo.device = d;
        for (int k = 0; k < per_gpu; ++k) {
          auto backend = core::CreateBackend(bo);
          if (!backend.ok()) return backend.status();
          out.push_back({*std::move(backend), d});
        }
      }
      *reason = absl::StrCat("cuda: ", out.size(), " worker(s) on GPU(s) ",
                             absl::StrJoin(devices, ","), " of ", *gpu_count, " visible (",
                             per_gpu, " per GPU)");
      return out;
    }
    if (o.backend == core::BackendKind::kCuda) {
      return absl::UnavailableError(absl::StrCat("--backend=cuda but no GPU: ", why));
    }
    if (!o.gpu_devices.empty()) {  // GPUs were asked for: no silent fall-back to the CPU
      return absl::UnavailableError(
          absl::StrCat("--gpu_devices=", selected, " but no GPU is visible: ", why));
    }
  }
  bo.kind = core::BackendKind::kCpu;
  auto backend = core::CreateBackend(bo);
  if (!backend.ok()) return backend.status();
  out.push_back({*std::move(backend), -1});
  *reason = o.backend == core::BackendKind::kCpu ? std::string("cpu: chosen by --backend=cpu")
                               : absl::StrCat("cpu: no GPU available (", why, ")");
  return out;
}

// What can be said of --gpu_devices before the devices are counted (warm-up).
absl::Status CheckGpuDevices(const WorkerOptions& o) {
  if (o.gpu_devices.empty()) return absl::OkStatus();
  if (o.backend == core::BackendKind::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu_devices=", absl::StrJoin(o.gpu_devices, ","), " selects GPUs: not with --backend=cpu"));
  }
  for (int d : o.gpu_devices) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpu_devices: bad device ", d, " (CUDA device ordinals: 0, 1, ...)"));
    }
  }
  return absl::OkStatus();
}

// Plane memory kept for reuse per frame the server holds at once: IMAGE and IVAR of a
// DESI r frame (4128 x 4114 float32) and, for raw planes, its MASK bits; for raw planes
// of a .fits.gz, the block the file is inflated into instead of IMAGE and IVAR, since
// they are parts of it (196 MiB for r, whose READNOISE HDU the block has room for but
// does not hold), with the MASK bits 230 MiB. Only memory that frames used is ever kept;
// this bounds what stays idle.
constexpr int64_t kCachedBytesPerFrame = int64_t{240} << 20;
// Memory kept for reuse per loader thread, for what a load needs only while it lasts
// (PreprocOptions::load_buffers): for a DESI r .fits.gz its compressed bytes (110 MB at
// Python's gzip level 6), the inflation's work buffers (8 MiB), the FITS file inflated
// from them (204 MB; in the planes' memory above with raw planes) and the MASK bits
// (34 MB). Plain .fits inputs use only the last.
constexpr int64_t kLoadBytesPerLoader = int64_t{384} << 20;
// Memory kept for reuse per frame file the server writes at once (one per worker and per
// streaming thread at most): the image of a DESI frame file in memory, 70 MB for r, 86 MB
// for z.
constexpr int64_t kFileBytesPerFrame = int64_t{96} << 20;
// Per-bin arrays kept for reuse per frame the server assembles at once (one per worker and
// streaming thread at most): a server-written DESI frame's (flux, ivar, chi2pix,
// pixmask_fraction, specmask, failed bins: 44 MB for r, 55 MB for z).
constexpr int64_t kFrameArrayBytesPerFrame = int64_t{64} << 20;
// Rounded bundles kept for reuse per frame a float32 stream sends at once (one per
// streaming thread at most): a DESI r frame's 20 bundles, 3.3 MB each in 4 MiB blocks.
constexpr int64_t kWireBytesPerFrame = int64_t{80} << 20;

}  // namespace

class SpexdServer::Impl {
 public:
  ServerOptions options;
  // Host decoding (JobEnvironment; the planes are decoded on `pool` below): declared
  // first, so that they outlive the scheduler's loader threads and every job.
  core::PlaneBufferPool plane_buffers{0};  // bound set with the workers (WarmUp)
  core::PlaneBufferPool load_buffers{0};   // the same
  core::PlaneBufferPool file_buffers{0};   // the same
  core::PlaneBufferPool wire_buffers{0};   // the same
  core::FrameArrayPool frame_arrays{0};     // the same
  std::atomic<bool> float32_planes{false};
  std::atomic<bool> raw_planes{false};
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<DataRoots> roots;
  std::unique_ptr<DataRoots> output_roots;
  std::unique_ptr<PsfCache> cache;
  // The host threads every backend runs its parallel loops on (BackendOptions::pool), and
  // the loaders decode frames' planes on: --cpu_threads in all, counting the worker's own.
  // Outlives the scheduler, which owns the backends.
  std::unique_ptr<core::TaskPool> pool;
  // The server-written frame files' writes (FitsWriteOptions::write_pool): threads that
  // wait in the kernel for the files, apart from `pool`. Outlives every job.
  std::unique_ptr<core::TaskPool> file_writes;
  // Outlives the scheduler and every job, which hand it sampled bundles.
  std::unique_ptr<ShadowParity> shadow;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<RegionRegistry> regions;  // jobs hold the regions they use by shared_ptr
  ServiceContext context;
  std::unique_ptr<CallWatchdog> watchdog;  // outlives the gRPC server (declared before it)
  std::unique_ptr<ExtractionService> extraction;
  std::unique_ptr<AdminService> admin;
  std::unique_ptr<CudaRegionsService> cuda_regions;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::thread warmup_thread;
  std::thread monitor_thread;
  absl::Notification warmup_done;
  absl::Status warmup_status;  // written before warmup_done is notified
  absl::Mutex mu;
  bool drained ABSL_GUARDED_BY(mu) = false;
  bool stop_monitor ABSL_GUARDED_BY(mu) = false;

  void SetServing(bool serving) {
    context.serving.store(serving);
    server->GetHealthCheckService()->SetServingStatus(serving);
    metrics->SetServing(serving);
  }

  void WarmUp() {
    absl::Status status = [&]() -> absl::Status {
      std::string reason;
      int gpu_count = 0;
      std::vector<WorkerBackend> workers;
      if (options.workers.backend_factory) {
        auto made = options.workers.backend_factory(&reason);
        if (!made.ok()) return made.status();
        // A backend holding device memory is on that device (test backends with a
        // made-up device), so that jobs bound to a GPU find their worker.
        for (auto& b : *made) {
          const int device = b->Memory().device;
          workers.push_back({std::move(b), device});
        }
      } else {
        auto chosen = ChooseBackends(options.workers, pool.get(), &gpu_count, &reason);
        if (!chosen.ok()) return chosen.status();
        workers = *std::move(chosen);
      }
      context.SetBackendChoice(gpu_count, reason);
      Log(LogLevel::kInfo, "backend_choice", {{"choice", reason}, {"gpus", gpu_count}});
      // Float32 planes when every worker takes them (the CPU and CUDA backends); a frame's
      // planes stay cached for the next frames while prepared, extracted or streamed.
      bool float32 = !workers.empty();
      for (const WorkerBackend& w : workers) float32 &= core::TakesFloat32Planes(*w.backend);
      float32_planes.store(float32);
      // Raw planes (the file's bytes, ruled on the device) when every worker takes them.
      bool raw = !workers.empty();
      for (const WorkerBackend& w : workers) raw &= core::TakesRawPlanes(*w.backend);
      raw_planes.store(raw);
      // With GPU workers the planes are decoded into page-locked host memory, so that the
      // upload is one DMA per plane (the cached planes stay page-locked). One pinner serves
      // every worker: its registrations are portable across devices.
      for (const WorkerBackend& w : workers) {
        if (!float32 || w.backend->gpu() == nullptr) continue;
        plane_buffers.set_pinner(w.backend->gpu()->PlanePinner());
        break;
      }
      const int64_t nworkers = static_cast<int64_t>(workers.size());
      for (WorkerBackend& w : workers) scheduler->AddWorker(std::move(w.backend), w.gpu_device);
      // The frames prepared ahead, and per worker the one extracting and those streaming.
      const int64_t frames_held =
          scheduler->prefetch_bound() + nworkers + scheduler->streaming_threads();
      plane_buffers.set_max_cached_bytes(frames_held * kCachedBytesPerFrame);
      load_buffers.set_max_cached_bytes(scheduler->num_loaders() * kLoadBytesPerLoader);
      frame_arrays.set_max_idle_bytes((nworkers + scheduler->streaming_threads()) *
                                      kFrameArrayBytesPerFrame);
      file_buffers.set_max_cached_bytes((nworkers + scheduler->streaming_threads()) *
                                        kFileBytesPerFrame);
      wire_buffers.set_max_cached_bytes(scheduler->streaming_threads() * kWireBytesPerFrame);
      for (const std::string& path : options.storage.preload_psfs) {
        auto file = roots->ReadFile(path, options.limits.max_upload_bytes);
        if (!file.ok()) return file.status();
        auto loaded = cache->Load(file->bytes, file->path, FitsLimits(options.limits));
        if (!loaded.ok()) return loaded.status();
        Log(LogLevel::kInfo, "psf_preloaded", {{"id", loaded->id}, {"source", file->path}});
      }
      return absl::OkStatus();
    }();
    warmup_status = status;
    absl::MutexLock lock(&mu);
    if (status.ok() && !drained) {
      SetServing(true);
      Log(LogLevel::kInfo, "serving", {{"port", port}});
    } else if (!status.ok()) {
      Log(LogLevel::kError, "warmup_failed", {{"error", status.ToString()}});
    }
    warmup_done.Notify();
  }

  // spexd_gpu_memory_bytes per device, summed over its workers' backends.
  void PublishGpuMemory() {
    std::map<int, double> per_device;
    for (const core::BackendMemory& m : scheduler->BackendMemory()) {
      if (m.device >= 0) per_device[m.device] += static_cast<double>(m.device_bytes);
    }
    for (const auto& [device, bytes] : per_device) metrics->SetGpuMemory(device, bytes);
  }

  // Health follows the backends: a sticky device error makes the server NOT_SERVING
  // for good, so that an orchestrator replaces it.
  void Monitor() {
    absl::MutexLock lock(&mu);
    for (;;) {
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stop_monitor; };
      if (mu.AwaitWithTimeout(absl::Condition(&stop), absl::Seconds(1))) return;
      metrics->SetHostMemory(HostMemoryBytes());
      metrics->AccrueBusyTime();
      PublishGpuMemory();
      if (context.serving.load() && !scheduler->AllHealthy()) {
        Log(LogLevel::kError, "not_serving", {{"reason", "backend unhealthy"}});
        SetServing(false);
      }
    }
  }
};

SpexdServer::SpexdServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<SpexdServer>> SpexdServer::Start(ServerOptions options) {
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.options = std::move(options);
  const ServerOptions& o = s.options;
  if (absl::Status st = CheckGpuDevices(o.workers); !st.ok()) return st;
  s.metrics = std::make_unique<ServerMetrics>();
  if (!o.network.metrics_listen.empty()) {
    if (absl::Status st = s.metrics->StartExposer(o.network.metrics_listen); !st.ok()) return st;
  }
  auto roots = DataRoots::Create(o.storage.data_roots);
  if (!roots.ok()) return roots.status();
  s.roots = std::make_unique<DataRoots>(*std::move(roots));
  auto output_roots = DataRoots::Create(o.storage.output_roots, "--output_roots");
  if (!output_roots.ok()) return output_roots.status();
  s.output_roots = std::make_unique<DataRoots>(*std::move(output_roots));
  std::vector<std::string> full_roots;
  SPEXD_RETURN_IF_ERROR(s.output_roots->CheckWritable(&full_roots));
  for (const std::string& root : full_roots) {
    Log(LogLevel::kWarning, "output_root_full",
        {{"root", root}, {"warning", "no space left: outputs there fail until space is freed"}});
  }
  // The whole filesystem as a root is allowed (a test node, a container with only its
  // data mounted) but is seldom meant: every file the server can read, or write, is then
  // open to its clients.
  for (const auto& [flag, configured] : {std::pair{"--data_roots", s.roots.get()},
                                         std::pair{"--output_roots", s.output_roots.get()}}) {
    for (const std::string& root : configured->roots()) {
      if (root != "/") continue;
      Log(LogLevel::kWarning, "root_is_whole_filesystem",
          {{"flag", flag},
           {"warning", absl::StrCat(flag, " includes /: clients may name any file the server",
                                    " can ", configured == s.roots.get() ? "read" : "write")}});
    }
  }
  const int host_threads =
      o.workers.cpu_threads > 0 ? o.workers.cpu_threads : core::HardwareThreads();
  s.pool = core::MakeTaskPool(host_threads - 1, "spexd-host");
  // A thread per eight cores: one per GPU worker on a GPU node (16 cores and two workers
  // a GPU), each writing one frame file at a time.
  s.file_writes = core::MakeTaskPool(std::max(2, host_threads / 8), "spexd-write");
  s.scheduler = std::make_unique<Scheduler>(o.scheduling, s.metrics.get());
  s.watchdog = std::make_unique<CallWatchdog>(absl::Seconds(o.limits.upload_idle_seconds),
                                              absl::Seconds(o.limits.write_timeout_seconds),
                                              s.metrics.get());
  // A geometry the cache drops (eviction, UnloadPsf) also leaves every worker's device.
  Scheduler* scheduler = s.scheduler.get();
  s.cache = std::make_unique<PsfCache>(
      o.storage.psf_cache_bytes, s.metrics.get(),
      [scheduler](const std::shared_ptr<const core::Geometry>& g) { scheduler->ReleaseGeometry(g); });
  s.context.env.cache = s.cache.get();
  s.context.env.metrics = s.metrics.get();
  s.context.env.roots = s.roots.get();
  s.context.env.output_roots = s.output_roots.get();
  s.context.env.limits = o.limits;
  s.context.env.decode_pool = s.pool.get();
  s.context.env.file_writes = s.file_writes.get();
  s.context.env.plane_buffers = &s.plane_buffers;
  s.context.env.load_buffers = &s.load_buffers;
  s.context.env.file_buffers = &s.file_buffers;
  s.context.env.wire_buffers = &s.wire_buffers;
  s.context.env.frame_arrays = &s.frame_arrays;
  s.context.env.float32_planes = &s.float32_planes;
  s.context.env.raw_planes = &s.raw_planes;
  s.shadow = std::make_unique<ShadowParity>(o.shadow_parity, &s.metrics->health());
  s.context.env.shadow = s.shadow->enabled() ? s.shadow.get() : nullptr;
  // The CPU backend solves one patch per thread at once (for the memory estimate).
  s.context.env.limits.solver_threads = host_threads;
  s.context.scheduler = s.scheduler.get();
  s.regions = std::make_unique<RegionRegistry>(s.metrics.get());
  s.context.regions = s.regions.get();
  s.context.auth_token = o.security.auth_token;
  s.context.watchdog = s.watchdog.get();
  s.context.tls = !o.security.tls_cert_file.empty();
  auto creds = MakeCredentials(o.security);
  if (!creds.ok()) return creds.status();

  s.extraction = std::make_unique<ExtractionService>(&s.context);
  s.admin = std::make_unique<AdminService>(&s.context);
  s.cuda_regions = std::make_unique<CudaRegionsService>(&s.context);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.network.listen, *creds, &s.port);
  builder.RegisterService(s.extraction.get());
  builder.RegisterService(s.admin.get());
  builder.RegisterService(s.cuda_regions.get());
  const int max_message = static_cast<int>(o.limits.max_message_bytes);
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  auto ms = [](double seconds) { return static_cast<int>(std::min(seconds * 1000.0, 2.0e9)); };
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             ms(o.limits.handshake_timeout_seconds));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(o.limits.connection_idle_seconds));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(o.limits.keepalive_seconds));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  // gRPC sets SO_REUSEPORT by default: a second spexd on a port the first serves would
  // bind too and take part of its connections (with its own roots, tokens, TLS and PSF
  // cache). Without it the bind fails and the second server exits, saying why.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // For a unix socket, gRPC removes the file in its way: refuse one that is answered.
  SPEXD_RETURN_IF_ERROR(RefuseServedUnixSocket(o.network.listen));
  s.server = builder.BuildAndStart();
  if (s.server == nullptr || s.port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", o.network.listen, ": ",
        HasLocalSocketScheme(o.network.listen) ? "gRPC could not bind it"
                                               : WhyCannotBind(o.network.listen)));
  }
  // Per-service statuses too, for probes that name the service; SetServing() then
  // updates every registered name at once.
  for (const char* name : {"spexd.v1.Extraction", "spexd.v1.Admin", "spexd.v1.CudaRegions"}) {
    s.server->GetHealthCheckService()->SetServingStatus(name, false);
  }
  s.SetServing(false);  // until warm-up is done
  Log(LogLevel::kInfo, "listening",
      {{"address", o.network.listen}, {"port", s.port},
       {"metrics_port", s.metrics->exposer_port()}, {"tls", s.context.tls},
       {"mutual_tls", !o.security.tls_client_ca_file.empty()},
       {"auth", !o.security.auth_token.empty()},
       {"data_roots", absl::StrJoin(s.roots->roots(), ",")},
       {"output_roots", absl::StrJoin(s.output_roots->roots(), ",")},
       {"blas", core::BlasCoreReport()}});
  s.warmup_thread = std::thread([&s] { s.WarmUp(); });
  s.monitor_thread = std::thread([&s] { s.Monitor(); });
  return std::unique_ptr<SpexdServer>(new SpexdServer(std::move(impl)));
}

SpexdServer::~SpexdServer() { Drain(absl::ZeroDuration()); }

int SpexdServer::port() const { return impl_->port; }
int SpexdServer::metrics_port() const { return impl_->metrics->exposer_port(); }
ServerMetrics& SpexdServer::metrics() { return *impl_->metrics; }
PsfCache& SpexdServer::cache() { return *impl_->cache; }

absl::Status SpexdServer::WaitForWarmUp(absl::Duration timeout) {
  if (!impl_->warmup_done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError("warm-up still running");
  }
  return impl_->warmup_status;
}

void SpexdServer::Drain(absl::Duration grace) {
  Impl& s = *impl_;
  {
    absl::MutexLock lock(&s.mu);
    if (s.drained) return;
    s.drained = true;
    s.context.draining.store(true);
    s.SetServing(false);
  }
  Log(LogLevel::kInfo, "draining", {{"grace_s", absl::ToDoubleSeconds(grace)}});
  s.scheduler->StopAccepting();
  // Uploads (and streams still without their header) are refused now, not after the
  // client has sent the whole frame; admitted work is left to finish.
  s.watchdog->DrainAll();
  // The calls holding regions would otherwise keep Shutdown waiting for the whole grace
  // period; extractions in flight keep their regions mapped until they end.
  s.regions->CloseAll(absl::UnavailableError("server is draining: CUDA region released"));
  // Stops accepting calls, waits for those in flight until the deadline, then cancels
  // them (their jobs see the cancel flag at the next bundle) and waits for them to end.
  s.server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(grace));
  s.server->Wait();
  if (s.warmup_thread.joinable()) s.warmup_thread.join();
  s.scheduler->Shutdown();
  {
    absl::MutexLock lock(&s.mu);
    s.stop_monitor = true;
  }
  if (s.monitor_thread.joinable()) s.monitor_thread.join();
  s.metrics->StopExposer();  // scrapes saw spexd_serving 0 through the drain
  Log(LogLevel::kInfo, "drained", {});
}

}  // namespace spexd::server
