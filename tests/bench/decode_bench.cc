// Benchmark: host read + decode of one preproc frame, the work a spexd
// loader thread does per request before the backend sees the image. Times
// PreprocReader::Open (headers; for .fits.gz also the inflation) and Read (pixels, pixel
// rules) separately, plain and gzip, with float64 planes (what a backend without float32
// planes takes), with float32 planes kept (what the CPU backend takes) and raw (the file's
// bytes and the MASK bits, ruled on the device: what the CUDA backend takes).
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
//                      [--planes all|float32|float64|raw]
//                      [--inflate-only 1]
//
// For each .gz input it also times the inflation alone (InflateFits, one thread, into
// blocks reused from run to run as spexd's loaders do); --inflate-only 1 skips the
// Open/Read timings.
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
#include "core/io/fits_gunzip.h"
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
  std::string planes = "all";
  bool inflate_only = false;
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
  std::string planes;  // float64, float32 or raw
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

absl::StatusOr<Result> TimeDecode(const std::string& path, const std::string& planes, int repeats,
                                  spexd::core::TaskPool* pool) {
  spexd::core::PreprocOptions options;
  options.keep_float32 = planes != "float64";
  options.keep_raw = planes == "raw";
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
  res.planes = planes;
  res.open_median = Median(open);
  res.read_median = Median(read);
  res.total_median = Median(total);
  res.total_p90 = P90(total);
  res.cpu_median = Median(cpu);
  return res;
}

struct InflateResult {
  std::string input;
  double median = 0, mb_per_s = 0;
  double cpu_median = 0;  // process CPU seconds per call
};

// The inflation of `path` alone (InflateFits on the calling thread).
absl::StatusOr<InflateResult> TimeInflate(const std::string& path, int repeats) {
  const std::string gz = ReadWhole(path);
  // As spexd's loaders: the output reuses the memory of the runs before.
  spexd::core::PlaneBufferPool buffers(int64_t{1} << 30);
  std::vector<double> t, cpu;
  std::size_t bytes = 0;
  for (int r = 0; r <= repeats; ++r) {  // run 0 faults the output's pages in
    const Clock::time_point t0 = Clock::now();
    const double c0 = CpuSeconds();
    auto fits = spexd::core::InflateFits(gz, path, {}, {}, &buffers);
    if (!fits.ok()) return fits.status();
    bytes = fits->view().size();
    if (r > 0) {
      t.push_back(Seconds(t0, Clock::now()));
      cpu.push_back(CpuSeconds() - c0);
    }
  }
  InflateResult res;
  res.input = path;
  res.median = Median(t);
  res.cpu_median = Median(cpu);
  res.mb_per_s = static_cast<double>(bytes) / 1e6 / res.median;
  return res;
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
  for (const std::string& input : args->inputs) {
    if (input.size() < 3 || input.substr(input.size() - 3) != ".gz") continue;
    absl::StatusOr<InflateResult> r = TimeInflate(input, args->repeats);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
      return 1;
    }
    std::fprintf(stderr, "%s inflate (one thread): %.3f s (%.0f MB/s), cpu %.3f s\n", input.c_str(),
                 r->median, r->mb_per_s, r->cpu_median);
    inflates.push_back(*r);
  }
  for (const std::string& input : args->inputs) {
    if (args->inflate_only) break;
    for (const char* planes : {"float64", "float32", "raw"}) {
      if (args->planes != "all" && args->planes != planes) continue;
      absl::StatusOr<Result> r =
          TimeDecode(input, planes, args->repeats, threads > 1 ? &pool : nullptr);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
        return 1;
      }
      std::fprintf(stderr, "%s %s: open %.3f s, read %.3f s, total %.3f s (p90 %.3f), cpu %.3f s\n",
                   input.c_str(), planes, r->open_median, r->read_median,
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
                                    r.input, r.planes, r.open_median,
                                    r.read_median, r.total_median, r.total_p90, r.cpu_median));
  }
  absl::StrAppend(&js, "], \"inflate\": [");
  for (std::size_t i = 0; i < inflates.size(); ++i) {
    const InflateResult& r = inflates[i];
    absl::StrAppend(&js, i > 0 ? ", " : "",
                    absl::StrFormat("{\"input\": \"%s\", \"seconds\": %.4f, \"cpu_s\": %.4f, \"mb_per_s\": %.1f}",
                                    r.input, r.median, r.cpu_median, r.mb_per_s));
  }
  absl::StrAppend(&js, "]}\n");
  if (!args->json.empty()) {
    std::ofstream(args->json) << js;
  } else {
    std::printf("%s", js.c_str());
  }
  return 0;
}
