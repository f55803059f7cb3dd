// Benchmark: host read + decode of one preproc frame, the work a spexd
// loader thread does per request before the backend sees the image. Times
// PreprocReader::Open (headers; for .fits.gz also the inflation) and Read (pixels, pixel
// rules) separately, plain and gzip, with float64 planes (what the CPU backend takes) and
// with float32 planes kept (what the CUDA backend takes).
//
// Without --input it writes a synthetic r frame first (4128 x 4114 like a DESI r CCD:
// IMAGE and IVAR float32 with noise-like values, MASK int16 RICE tile-compressed as
// desispec writes it, a 500-row FIBERMAP) as decode-bench.fits and .fits.gz under --dir.
// Also the CPU time of the process per frame (all its threads: what a loader costs the
// host, whatever the load of the machine). JSON on stdout (or --json FILE), summary on
// stderr.
//
//   spexd_decode_bench [--input FILE]... [--dir DIR (/tmp)] [--repeats 5]
//                      [--threads T (decode pool; 0 = cores, 1 = no pool)] [--json FILE]
//                      [--planes both|float32|float64]
//                      [--inflate-threads 1,2,4,8] [--inflate-only 1]
//                      [--inflate-paired N] [--inflate-bmi2 0|1]
//
// For each .gz input it also times the one-call inflation alone (InflateGzipInto into a
// reused buffer) with a pool of N - 1 threads for each N of --inflate-threads
// (N = 1: libdeflate alone, no parallel inflation), and the parallel decoder with
// all its chunks on one thread ("1x8 chunks": its speed per core). --inflate-only 1 skips
// the Open/Read timings. --inflate-paired N instead alternates libdeflate and "1x8 chunks"
// N times in one thread and prints the minimum thread CPU of each and of the phases: on a
// shared host the steadiest comparison of the two; it also times the 8 chunks decoded two
// at a time, interleaved (ParallelInflateOptions::pair_chunks). --inflate-bmi2 0 runs the decoder's
// plain build where the CPU has BMI2 (core/io/internal/inflate_fast.h).
#include <fitsio.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/io/fits_file.h"
#include "absl/strings/str_split.h"
#include "core/base/parallel_for.h"
#include "core/io/internal/gzip.h"
#include "core/io/internal/inflate_fast.h"
#include "core/io/internal/parallel_inflate.h"
#include "core/io/plane_buffer.h"
#include "core/io/preproc.h"
#include "core/base/task_pool.h"

namespace {

using Clock = std::chrono::steady_clock;
using spexd::core::FitsFile;

struct Args {
  std::vector<std::string> inputs;
  std::string dir = "/tmp";
  std::string json;
  int repeats = 5;
  int threads = 0;
  std::string planes = "both";
  std::vector<int> inflate_threads = {1, 2, 4, 8};
  bool inflate_only = false;
  int inflate_paired = 0;
  bool inflate_bmi2 = true;
};

absl::StatusOr<Args> Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(k, " needs a value"));
    const char* v = argv[++i];
    if (k == "--input") a.inputs.push_back(v);
    else if (k == "--dir") a.dir = v;
    else if (k == "--json") a.json = v;
    else if (k == "--repeats") a.repeats = std::max(1, std::atoi(v));
    else if (k == "--threads") a.threads = std::atoi(v);
    else if (k == "--planes") a.planes = v;
    else if (k == "--inflate-only") a.inflate_only = std::atoi(v) != 0;
    else if (k == "--inflate-paired") a.inflate_paired = std::max(1, std::atoi(v));
    else if (k == "--inflate-bmi2") a.inflate_bmi2 = std::atoi(v) != 0;
    else if (k == "--inflate-threads") {
      a.inflate_threads.clear();
      for (absl::string_view t : absl::StrSplit(v, ',')) a.inflate_threads.push_back(std::max(1, std::atoi(std::string(t).c_str())));
    }
    else return absl::InvalidArgumentError(absl::StrCat("unknown flag ", k));
  }
  return a;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The synthetic frame: sky-like noise (a few hundred electrons, so that gzip finds what it
// finds in real frames: the low mantissa bits are random), ivar from it, 0.1% masked.
absl::Status WriteSyntheticFrame(const std::string& path) {
  constexpr long kWidth = 4114, kHeight = 4128;
  const std::size_t n = static_cast<std::size_t>(kWidth) * kHeight;
  std::vector<float> image(n), ivar(n);
  std::vector<int16_t> mask(n, 0);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) {
    const float model = 50.0f + 400.0f * static_cast<float>((i * 2654435761u) % 97) / 97.0f;
    image[i] = model + noise(rng) * std::sqrt(model + 9.0f);
    ivar[i] = 1.0f / (model + 9.0f);
    if (i % 997 == 0) mask[i] = 2;
  }
  image[12345] = std::numeric_limits<float>::quiet_NaN();
  auto file = FitsFile::Create(path);
  if (!file.ok()) return file.status();
  const std::vector<long> naxes = {kWidth, kHeight};
  if (auto s = file->WriteImage<float>("IMAGE", naxes, image.data()); !s.ok()) return s;
  if (auto s = file->WriteImage<float>("IVAR", naxes, ivar.data()); !s.ok()) return s;
  int status = 0;
  fits_set_compression_type(file->get(), RICE_1, &status);
  if (auto s = file->WriteImage<int16_t>("MASK", naxes, mask.data()); !s.ok()) return s;
  fits_set_compression_type(file->get(), NOCOMPRESS, &status);
  // FIBERMAP: 500 rows, one column, enough for the copy the reader makes.
  char* ttype[] = {const_cast<char*>("FIBER")};
  char* tform[] = {const_cast<char*>("J")};
  fits_create_tbl(file->get(), BINARY_TBL, 500, 1, ttype, tform, nullptr, "FIBERMAP", &status);
  std::vector<int32_t> fiber(500);
  for (int i = 0; i < 500; ++i) fiber[static_cast<std::size_t>(i)] = i;
  fits_write_col(file->get(), TINT, 1, 1, 1, 500, fiber.data(), &status);
  if (status != 0) return file->Error(status, "writing the synthetic frame");
  return file->Close();
}

// The whole file (the benchmark's inputs: a few hundred MB at most).
std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::Status WriteGzip(const std::string& from, const std::string& to) {
  auto gz = spexd::core::GzipCompress(ReadWhole(from));
  if (!gz.ok()) return gz.status();
  std::ofstream(to, std::ios::binary) << *gz;
  return absl::OkStatus();
}

struct Result {
  std::string input;
  bool float32 = false;
  double open_median = 0, read_median = 0, total_median = 0, total_p90 = 0, cpu_median = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double P90(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, v.size() * 9 / 10)];
}

absl::StatusOr<Result> TimeDecode(const std::string& path, bool float32, int repeats,
                                  spexd::core::TaskPool* pool) {
  spexd::core::PreprocOptions options;
  options.keep_float32 = float32;
  options.pool = pool;
  // As spexd does: float32 planes reuse the memory of the frames before.
  spexd::core::PlaneBufferPool buffers(int64_t{1} << 30);
  options.buffers = &buffers;
  // ... and so does the memory a .fits.gz is read and inflated into.
  spexd::core::PlaneBufferPool load_buffers(int64_t{1} << 30);
  options.load_buffers = &load_buffers;
  std::vector<double> open, read, total, cpu;
  for (int r = 0; r <= repeats; ++r) {  // run 0 warms the page cache
    const double c0 = CpuSeconds();
    const Clock::time_point t0 = Clock::now();
    auto reader = spexd::core::PreprocReader::Open(path, options);
    if (!reader.ok()) return reader.status();
    const Clock::time_point t1 = Clock::now();
    auto image = reader->Read();
    if (!image.ok()) return image.status();
    const Clock::time_point t2 = Clock::now();
    const double c2 = CpuSeconds();
    if (r == 0) continue;
    cpu.push_back(c2 - c0);
    open.push_back(Seconds(t0, t1));
    read.push_back(Seconds(t1, t2));
    total.push_back(Seconds(t0, t2));
  }
  Result res;
  res.input = path;
  res.float32 = float32;
  res.open_median = Median(open);
  res.read_median = Median(read);
  res.total_median = Median(total);
  res.total_p90 = P90(total);
  res.cpu_median = Median(cpu);
  return res;
}

struct InflateResult {
  std::string label;
  int threads = 1;
  double median = 0, mb_per_s = 0;
  double cpu_median = 0;  // process CPU seconds per call (all threads): steady on a loaded host
  int chunks = 0, chunks_used = 0;
  double sequential_mb = 0;
  spexd::core::internal::ParallelInflateStats stats;
};

// The one-call inflation of `path` alone, `threads` at once (pool == null with threads > 1:
// the parallel decoder with every chunk on the caller).
absl::StatusOr<InflateResult> TimeInflate(const std::string& path, int threads, bool own_pool,
                                          int repeats) {
  const std::string gz = ReadWhole(path);
  std::string out(spexd::core::GzipTrailerSize(gz), '\0');
  std::unique_ptr<spexd::core::TaskPool> pool = spexd::core::MakeTaskPool(own_pool ? threads - 1 : 0);
  spexd::core::internal::ParallelInflateStats stats;
  spexd::core::internal::ParallelInflateOptions options;
  // As spexd's loaders: chunk outputs reuse the memory of the runs before.
  spexd::core::PlaneBufferPool buffers(int64_t{1} << 30);
  options.buffers = &buffers;
  options.pool = own_pool ? pool.get() : nullptr;
  options.max_threads = threads;
  options.stats = &stats;
  std::vector<double> t, cpu;
  for (int r = 0; r <= repeats; ++r) {  // run 0 faults the output's pages in
    const Clock::time_point t0 = Clock::now();
    const double c0 = CpuSeconds();
    auto n = spexd::core::InflateGzipInto(gz, out.data(), out.size(), path, {}, options);
    if (!n.ok()) return n.status();
    if (r > 0) {
      t.push_back(Seconds(t0, Clock::now()));
      cpu.push_back(CpuSeconds() - c0);
    }
  }
  InflateResult res;
  res.label = !own_pool && threads > 1 ? absl::StrCat("1x", threads, " chunks") : absl::StrCat(threads);
  res.threads = threads;
  res.median = Median(t);
  res.cpu_median = Median(cpu);
  res.mb_per_s = static_cast<double>(out.size()) / 1e6 / res.median;
  res.chunks = stats.chunks;
  res.chunks_used = stats.chunks_used;
  res.sequential_mb = static_cast<double>(stats.sequential_bytes) / 1e6;
  res.stats = stats;
  return res;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// --inflate-paired: libdeflate and the parallel decoder's 8 chunks on this thread, in turn:
// one chunk at a time, and two at a time interleaved (ParallelInflateOptions::pair_chunks).
absl::Status InflatePaired(const std::string& path, int rounds) {
  const std::string gz = ReadWhole(path);
  std::string out(spexd::core::GzipTrailerSize(gz), '\0');
  spexd::core::PlaneBufferPool buffers(int64_t{1} << 30);
  spexd::core::internal::ParallelInflateStats stats;
  spexd::core::internal::ParallelInflateOptions one, chunks, pairs;
  chunks.buffers = pairs.buffers = &buffers;
  chunks.max_threads = 8;
  chunks.pair_chunks = false;
  pairs.max_threads = 4;  // 8 chunks, two a thread
  pairs.pair_chunks = true;
  chunks.stats = pairs.stats = &stats;
  double lib = 1e9, par = 1e9, pair = 1e9, decode = 1e9, write = 1e9, crc = 1e9, pair_decode = 1e9;
  for (int r = 0; r <= rounds; ++r) {  // round 0 faults the pages in
    const double c0 = ThreadCpuSeconds();
    auto a = spexd::core::InflateGzipInto(gz, out.data(), out.size(), path, {}, one);
    const double c1 = ThreadCpuSeconds();
    auto b = spexd::core::InflateGzipInto(gz, out.data(), out.size(), path, {}, chunks);
    const double c2 = ThreadCpuSeconds();
    const spexd::core::internal::ParallelInflateStats single = stats;
    auto c = spexd::core::InflateGzipInto(gz, out.data(), out.size(), path, {}, pairs);
    const double c3 = ThreadCpuSeconds();
    for (const auto* s : {&a, &b, &c}) {
      if (!s->ok()) return s->status();
    }
    if (r == 0) continue;
    lib = std::min(lib, c1 - c0);
    par = std::min(par, c2 - c1);
    pair = std::min(pair, c3 - c2);
    decode = std::min(decode, single.decode_s);
    write = std::min(write, single.write_s);
    crc = std::min(crc, single.crc_s);
    pair_decode = std::min(pair_decode, stats.decode_s);
  }
  std::fprintf(stderr, "%s paired x%d (min thread CPU): libdeflate %.4f s, 1x8 chunks %.4f s (%.3f x), "
               "4x2 chunks interleaved %.4f s (%.3f x; bmi2 %d); phases' min wall of 1x8: decode %.4f "
               "(interleaved %.4f), write %.4f, crc %.4f s\n", path.c_str(), rounds, lib, par, par / lib, pair,
               pair / lib, spexd::core::internal::Bmi2FastLoopInUse() ? 1 : 0, decode, pair_decode, write, crc);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Args> args = Parse(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  if (args->inputs.empty()) {
    const std::string plain = args->dir + "/decode-bench.fits";
    std::fprintf(stderr, "writing %s and %s.gz ...\n", plain.c_str(), plain.c_str());
    for (absl::Status s : {WriteSyntheticFrame(plain), WriteGzip(plain, plain + ".gz")}) {
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    args->inputs = {plain, plain + ".gz"};
  }
  const int threads = args->threads > 0 ? args->threads
                                        : static_cast<int>(std::thread::hardware_concurrency());
  spexd::core::TaskPool pool;
  if (threads > 1) pool.AddThreads(threads - 1);  // the caller is the other thread
  std::vector<Result> results;
  std::vector<InflateResult> inflates;
  spexd::core::internal::UseBmi2FastLoop(args->inflate_bmi2);
  for (const std::string& input : args->inputs) {
    if (input.size() < 3 || input.substr(input.size() - 3) != ".gz") continue;
    if (args->inflate_paired > 0) {
      if (absl::Status s = InflatePaired(input, args->inflate_paired); !s.ok()) {
        std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return 1;
      }
      continue;
    }
    std::vector<std::pair<int, bool>> runs;
    for (int n : args->inflate_threads) runs.emplace_back(n, true);
    runs.emplace_back(8, false);
    for (const auto& [n, own_pool] : runs) {
      absl::StatusOr<InflateResult> r = TimeInflate(input, n, own_pool, args->repeats);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
        return 1;
      }
      std::fprintf(stderr, "%s inflate, %s threads: %.3f s (%.0f MB/s), cpu %.3f s, chunks %d, chained %d, sequential %.1f MB; last run: decode %.3f, chain %.3f, write %.3f, crc %.3f s\n",
                   input.c_str(), r->label.c_str(), r->median, r->mb_per_s, r->cpu_median, r->chunks, r->chunks_used,
                   r->sequential_mb, r->stats.decode_s, r->stats.chain_s, r->stats.write_s, r->stats.crc_s);
      inflates.push_back(*r);
    }
  }
  for (const std::string& input : args->inputs) {
    if (args->inflate_only) break;
    for (bool float32 : {false, true}) {
      if (args->planes != "both" && args->planes != (float32 ? "float32" : "float64")) continue;
      absl::StatusOr<Result> r =
          TimeDecode(input, float32, args->repeats, threads > 1 ? &pool : nullptr);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
        return 1;
      }
      std::fprintf(stderr, "%s %s: open %.3f s, read %.3f s, total %.3f s (p90 %.3f), cpu %.3f s\n",
                   input.c_str(), float32 ? "float32" : "float64", r->open_median, r->read_median,
                   r->total_median, r->total_p90, r->cpu_median);
      results.push_back(*r);
    }
  }
  const char* sha = std::getenv("GIT_SHA");
  std::string js = absl::StrFormat(
      "{\"benchmark\": \"decode\", \"git_sha\": \"%s\", \"threads\": %d, \"repeats\": %d, "
      "\"hardware_concurrency\": %u, \"runs\": [",
      sha != nullptr ? sha : "", threads, args->repeats, std::thread::hardware_concurrency());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    absl::StrAppend(&js, i > 0 ? ", " : "",
                    absl::StrFormat("{\"input\": \"%s\", \"planes\": \"%s\", \"open_s\": %.4f, "
                                    "\"read_s\": %.4f, \"total_s\": %.4f, \"total_p90_s\": %.4f, "
                                    "\"cpu_s\": %.4f}",
                                    r.input, r.float32 ? "float32" : "float64", r.open_median,
                                    r.read_median, r.total_median, r.total_p90, r.cpu_median));
  }
  absl::StrAppend(&js, "], \"inflate\": [");
  for (std::size_t i = 0; i < inflates.size(); ++i) {
    const InflateResult& r = inflates[i];
    absl::StrAppend(&js, i > 0 ? ", " : "",
                    absl::StrFormat("{\"threads\": \"%s\", \"seconds\": %.4f, \"cpu_s\": %.4f, \"mb_per_s\": %.1f, "
                                    "\"chunks\": %d, \"chained\": %d, \"sequential_mb\": %.1f}",
                                    r.label, r.median, r.cpu_median, r.mb_per_s, r.chunks, r.chunks_used, r.sequential_mb));
  }
  absl::StrAppend(&js, "]}\n");
  if (!args->json.empty()) {
    std::ofstream(args->json) << js;
  } else {
    std::printf("%s", js.c_str());
  }
  return 0;
}
