#include "tests/bench/replay_backend.h"

#include <time.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/float_convert.h"
#include "core/io/preproc.h"
#include "core/plan/geometry.h"

namespace spexd::bench {
namespace {

int64_t ThreadCpuNanoseconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Frames of one key replay the same results.
std::string ShapeKey(const core::ExtractionJob& job) {
  const core::PatchPlan& p = job.geometry->plan();
  return absl::StrCat(p.image_height, "x", p.image_width, " specmin ", p.specmin, " nspec ", p.nspec,
                      " bundles ", p.nbundles, " nwave ", p.nwave, " ndiag ", p.ndiag, " model ",
                      job.want_model ? 1 : 0);
}

// A recording on disk: per bundle its scalars, then each array as a length and its values.
// Written and read by the same program on one machine: native byte order and sizes.
template <typename T>
void Put(std::ostream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <typename T>
void PutArray(std::ostream& out, const std::vector<T>& v) {
  Put(out, static_cast<uint64_t>(v.size()));
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}
template <typename T>
bool Get(std::istream& in, T* v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v), sizeof *v));
}
template <typename T>
bool GetArray(std::istream& in, std::vector<T>* v) {
  uint64_t n = 0;
  if (!Get(in, &n) || n > (uint64_t{1} << 32)) return false;
  v->resize(n);
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v->data()), static_cast<std::streamsize>(n * sizeof(T))));
}

constexpr uint64_t kMagic = 0x79616c7065726478;  // "xderplay"

bool Save(const std::string& path, const std::vector<core::BundleResult>& bundles) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    Put(out, kMagic);
    Put(out, static_cast<uint64_t>(bundles.size()));
    for (const core::BundleResult& b : bundles) {
      for (int v : {b.bundle, b.fiber_begin, b.nfibers, b.nwave, b.ndiag, b.model_y0, b.model_x0,
                    b.model_ny, b.model_nx, b.per_angstrom ? 1 : 0}) {
        Put(out, v);
      }
      for (int64_t v : {b.counts.extracted, b.counts.skipped, b.counts.retried, b.counts.failed}) Put(out, v);
      PutArray(out, b.flux);
      PutArray(out, b.ivar);
      PutArray(out, b.rdiags);
      PutArray(out, b.pixmask_fraction);
      PutArray(out, b.chi2pix);
      PutArray(out, b.failed_bins);
      PutArray(out, b.model);
      PutArray(out, b.patch_condition);
    }
    if (!out.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool Load(const std::string& path, std::vector<core::BundleResult>* bundles) {
  std::ifstream in(path, std::ios::binary);
  uint64_t magic = 0, n = 0;
  if (!Get(in, &magic) || magic != kMagic || !Get(in, &n) || n > 100000) return false;
  bundles->resize(n);
  for (core::BundleResult& b : *bundles) {
    int per_angstrom = 0;
    for (int* v : {&b.bundle, &b.fiber_begin, &b.nfibers, &b.nwave, &b.ndiag, &b.model_y0, &b.model_x0,
                   &b.model_ny, &b.model_nx, &per_angstrom}) {
      if (!Get(in, v)) return false;
    }
    b.per_angstrom = per_angstrom != 0;
    for (int64_t* v : {&b.counts.extracted, &b.counts.skipped, &b.counts.retried, &b.counts.failed}) {
      if (!Get(in, v)) return false;
    }
    if (!GetArray(in, &b.flux) || !GetArray(in, &b.ivar) || !GetArray(in, &b.rdiags) ||
        !GetArray(in, &b.pixmask_fraction) || !GetArray(in, &b.chi2pix) ||
        !GetArray(in, &b.failed_bins) || !GetArray(in, &b.model) || !GetArray(in, &b.patch_condition)) {
      return false;
    }
  }
  return true;
}

template <typename T>
void CopyInto(const std::vector<T>& from, std::vector<T>* to) {
  to->assign(from.begin(), from.end());  // reuses a lent array's capacity
}

// Into a block of `pool`, as the CUDA backend's device copies a batch's resolution words
// into its page-locked pool.
void CopyInto(const core::PlaneBuffer<char>& from, core::PlaneBufferPool* pool, core::PlaneBuffer<char>* to) {
  *to = core::PlaneBuffer<char>::Make(from.size(), pool);
  if (!from.empty()) std::memcpy(to->data(), from.data(), from.size());
}

// Each bundle's resolution also as the frame file's and the float32 stream's bytes,
// narrowed (and the file's summed) once here, for jobs that take it so
// (ExtractionJob::resolution_form): the CUDA backend narrows and sums them on the device,
// so that a replay of such a job costs the host only the copy (counted apart).
void AddFloat32Bytes(std::vector<core::BundleResult>* results) {
  for (core::BundleResult& b : *results) {
    b.rdiags_file = core::PlaneBuffer<char>::Make(4 * b.rdiags.size(), nullptr);
    b.rdiags_file_word_sum =
        core::NarrowToBigEndianFloat32(b.rdiags.data(), b.rdiags.size(), b.rdiags_file.data());
    b.rdiags_f32 = core::PlaneBuffer<char>::Make(4 * b.rdiags.size(), nullptr);
    core::NarrowToFloat32(b.rdiags.data(), reinterpret_cast<float*>(b.rdiags_f32.data()),
                          b.rdiags.size());
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const std::vector<core::BundleResult>>> ReplayStore::Results(
    const core::ExtractionJob& job) {
  const std::string key = ShapeKey(job);
  absl::MutexLock lock(&mu_);
  if (auto it = recorded_.find(key); it != recorded_.end()) return it->second;
  std::string file;
  if (!dir_.empty()) {
    file = dir_ + "/replay-" + key + ".bin";
    for (std::size_t i = dir_.size() + 1; i < file.size(); ++i) {
      if (file[i] == ' ') file[i] = '_';
    }
    auto stored = std::make_shared<std::vector<core::BundleResult>>();
    if (Load(file, stored.get()) && static_cast<int>(stored->size()) == job.geometry->plan().nbundles) {
      AddFloat32Bytes(stored.get());
      recorded_[key] = stored;
      return std::shared_ptr<const std::vector<core::BundleResult>>(stored);
    }
  }
  if (recorder_ == nullptr) {
    core::BackendOptions options;
    options.kind = core::BackendKind::kCpu;
    options.threads = recorder_threads_;
    auto made = core::CreateBackend(options);
    if (!made.ok()) return made.status();
    recorder_ = *std::move(made);
  }
  core::ExtractionJob all = job;
  all.bundles.clear();  // every bundle, so that any later subset replays
  // The CPU backend takes no raw planes: it records from a decoded copy of the frame.
  core::PreprocImage decoded;
  if (job.image->has_raw_planes()) {
    decoded = *job.image;
    core::DecodeRawPlanes(&decoded);
    all.image = &decoded;
  }
  auto results = std::make_shared<std::vector<core::BundleResult>>();
  auto summary = recorder_->Extract(all, [&](core::BundleResult&& b) {
    core::BundleResult kept = b;  // arrays of its own, not the recorder's pool's
    kept.recycler = nullptr;
    results->push_back(std::move(kept));
    return absl::OkStatus();
  });
  if (!summary.ok()) return summary.status();
  AddFloat32Bytes(results.get());
  recorded_[key] = results;
  if (!file.empty() && !Save(file, *results)) {
    return absl::InternalError("cannot store the recording in " + file);
  }
  return std::shared_ptr<const std::vector<core::BundleResult>>(results);
}

int ReplayStore::recordings() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(recorded_.size());
}

absl::StatusOr<core::ExtractionSummary> ReplayBackend::Extract(const core::ExtractionJob& job,
                                                               const core::BundleSink& sink) {
  if (absl::Status st = core::ValidateJob(job, /*float32_planes_ok=*/true,
                                          /*raw_planes_ok=*/true); !st.ok()) return st;
  if (job.device_image != nullptr) {
    return absl::FailedPreconditionError("the replay backend reads no device memory");
  }
  const auto start = std::chrono::steady_clock::now();
  auto results = store_->Results(job);
  if (!results.ok()) return results.status();
  std::vector<int> bundles = job.bundles;
  if (bundles.empty()) {
    for (int b = 0; b < job.geometry->plan().nbundles; ++b) bundles.push_back(b);
  }
  core::ExtractionSummary summary;
  double copy_s = 0;
  for (int b : bundles) {
    if (core::CancelRequested(job)) return absl::CancelledError("extraction cancelled");
    const core::BundleResult& from = (**results)[static_cast<std::size_t>(b)];
    const int64_t t0 = ThreadCpuNanoseconds();
    core::BundleResult out;
    arrays_->Lend(&out, from.flux.size(),
                  job.resolution_form == core::ResolutionForm::kFloat64
                      ? static_cast<std::size_t>(2 * from.ndiag + 1) : 0);
    out.bundle = from.bundle;
    out.fiber_begin = from.fiber_begin;
    out.nfibers = from.nfibers;
    out.nwave = from.nwave;
    out.ndiag = from.ndiag;
    CopyInto(from.flux, &out.flux);
    CopyInto(from.ivar, &out.ivar);
    if (job.resolution_form == core::ResolutionForm::kFileBytes) {
      out.rdiags.clear();
      CopyInto(from.rdiags_file, &words_, &out.rdiags_file);
      out.rdiags_file_word_sum = from.rdiags_file_word_sum;
    } else if (job.resolution_form == core::ResolutionForm::kStreamFloat32) {
      out.rdiags.clear();
      CopyInto(from.rdiags_f32, &words_, &out.rdiags_f32);
    } else {
      CopyInto(from.rdiags, &out.rdiags);
    }
    CopyInto(from.pixmask_fraction, &out.pixmask_fraction);
    CopyInto(from.chi2pix, &out.chi2pix);
    CopyInto(from.failed_bins, &out.failed_bins);
    out.model_y0 = from.model_y0;
    out.model_x0 = from.model_x0;
    out.model_ny = from.model_ny;
    out.model_nx = from.model_nx;
    out.model = from.model;
    out.counts = from.counts;
    out.patch_condition = from.patch_condition;
    out.per_angstrom = from.per_angstrom;
    const int64_t ns = ThreadCpuNanoseconds() - t0;
    store_->AddCopyNanoseconds(ns);
    copy_s += static_cast<double>(ns) * 1e-9;
    summary.counts += out.counts;
    if (absl::Status st = sink(std::move(out)); !st.ok()) return st;
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.stage_seconds["replay_copy"] = copy_s;
  return summary;
}

}  // namespace spexd::bench
