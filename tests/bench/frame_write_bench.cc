// Host time to write a desispec frame file (~0.3 s of one core per full r
// frame, on the critical path of every served request). Builds a synthetic full frame
// (500 fibres x 2326 wavelengths, 11 resolution diagonals, a FIBERMAP with desispec-like
// columns and CHECKSUM cards, ~150 input header cards), then times, each as the median
// and p90 of --repeats runs after one warm-up (wall and process CPU seconds):
//   reference       the serial CFITSIO writer (internal::FrameToFitsReference), and its
//                   parts: to_float (float32 copies), cfitsio_write (the HDUs written,
//                   headers included), checksums (fits_write_chksum on each HDU),
//                   take_memory (the memory file copied out);
//   frame_to_fits   core::FrameToFits with 1 thread and with --threads, and its phases
//                   (FitsWriteTimes: scores, headers, allocate, encode, checksums);
//   zero_fill       the output string's allocation and zero fill alone (serial part);
//   gzip            GzipCompress of the file (--gzip-repeats, default 1: seconds each);
//   write_fsync     WriteFileAtomically into --dir (temporary, fsync, rename);
//   sha256          server::Sha256Hex (the server records it; when the server is built).
//   tail_whole, tail_progressive (when the server is built): what a
//                   server-written .fits costs after the extraction's last bundle, into
//                   --dir through server::DataRoots: the whole file (FrameToFits, then
//                   the write and fsync beside the SHA-256), or the
//                   progressive file's rest (the last bundle's rows, Finish, then fsync
//                   and rename beside the SHA-256), its other bundles written before the
//                   clock starts, --bundle-ms apart (the GPU's pace: 7.5 ms per bundle
//                   of an r frame on an H100).
//   tail_whole_gz, tail_progressive_gz: the same for a .fits.gz: the whole file
//                   gzipped after FrameToFits (GzipFitsBytes on the pool), or the
//                   progressive file's chunks deflated as the rows come, so that the
//                   last bundle's rows, Finish (the chunks left: chunks_at_finish,
//                   mb_at_finish; the CRC combine) and, as the server does it, the
//                   member's write, fsync and rename beside its SHA-256 remain.
// Prints one JSON line:
//   spexd_frame_write_bench [--fibers 500] [--nwave 2326] [--ndiag 5] [--threads N]
//       [--repeats 5] [--gzip-repeats 1] [--dir /tmp] [--json out.json] [--bundle-ms 7.5]
//       [--stages reference,parts,new,zero,gzip,write,sha256,tail]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/parallel_for.h"
#include "core/frame/frame_writer.h"
#include "core/frame/internal/frame_hdus.h"
#include "core/frame/internal/frame_writer_reference.h"
#include "core/io/fits_file.h"
#include "core/io/internal/gzip.h"
#include "tests/frame_fixtures.h"
#ifdef SPEXD_BENCH_SHA256
#include "core/frame/progressive_frame_file.h"
#include "server/platform/content_id.h"
#include "server/platform/data_roots.h"
#endif

namespace {

using spexd::core::FitsFile;
using spexd::core::Frame;
using spexd::core::FrameMetadata;

struct Args {
  int fibers = 500, nwave = 2326, ndiag = 5, threads = 0, repeats = 5, gzip_repeats = 1;
  double bundle_ms = 7.5;
  std::string dir = "/tmp", json;
  std::string stages = "reference,parts,new,zero,gzip,write,sha256,tail";  // which to time
  bool Runs(const std::string& stage) const {
    return ("," + stages + ",").find("," + stage + ",") != std::string::npos;
  }
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (flag == "--fibers") a->fibers = std::atoi(v.c_str());
    else if (flag == "--nwave") a->nwave = std::atoi(v.c_str());
    else if (flag == "--ndiag") a->ndiag = std::atoi(v.c_str());
    else if (flag == "--threads") a->threads = std::atoi(v.c_str());
    else if (flag == "--repeats") a->repeats = std::max(1, std::atoi(v.c_str()));
    else if (flag == "--gzip-repeats") a->gzip_repeats = std::atoi(v.c_str());
    else if (flag == "--dir") a->dir = v;
    else if (flag == "--json") a->json = v;
    else if (flag == "--stages") a->stages = v;
    else if (flag == "--bundle-ms") a->bundle_ms = std::atof(v.c_str());
    else return false;
  }
  return a->fibers > 0 && a->nwave > 0 && a->ndiag >= 0;
}

Frame MakeFrame(const Args& a) {
  Frame f;
  f.nspec = a.fibers;
  f.nwave = a.nwave;
  f.ndiag = a.ndiag;
  for (int w = 0; w < a.nwave; ++w) f.wave.push_back(5760.0 + 0.8 * w);
  std::mt19937_64 rng(22);
  std::normal_distribution<double> normal(100.0, 300.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::size_t n = static_cast<std::size_t>(a.fibers) * a.nwave;
  for (std::size_t i = 0; i < n; ++i) {
    f.flux.push_back(normal(rng));
    f.ivar.push_back(unit(rng) * 1e-3);
    f.chi2pix.push_back(unit(rng) * 3);
    f.mask.push_back(unit(rng) < 0.05 ? 2u : 0u);
    f.pixmask_fraction.push_back(0.0);
  }
  f.rdiags.resize(n * (2 * a.ndiag + 1));
  for (double& r : f.rdiags) r = unit(rng) * 0.3;
  f.flux[17] = std::nan("");
  return f;
}

// desispec-like FIBERMAP rows (a few of its column types), with CHECKSUM/DATASUM.
std::string MakeFibermap(int rows) {
  auto fm = FitsFile::CreateMemory("fibermap");
  int status = 0;
  fits_create_img(fm->get(), BYTE_IMG, 0, nullptr, &status);
  std::vector<std::string> names, forms;
  for (int c = 0; c < 40; ++c) {
    names.push_back(absl::StrCat("COL", c));
    forms.push_back(c % 4 == 0 ? "D" : c % 4 == 1 ? "E" : c % 4 == 2 ? "K" : "8A");
  }
  std::vector<char*> ttype, tform;
  for (int c = 0; c < 40; ++c) {
    ttype.push_back(names[c].data());
    tform.push_back(forms[c].data());
  }
  fits_create_tbl(fm->get(), BINARY_TBL, rows, 40, ttype.data(), tform.data(), nullptr, "FIBERMAP",
                  &status);
  for (int c = 0; c < 40; ++c) {
    for (int r = 0; r < rows; ++r) {
      if (c % 4 == 3) {
        const char* s = r % 2 == 0 ? "TGT" : "SKY";
        fits_write_col(fm->get(), TSTRING, c + 1, r + 1, 1, 1, const_cast<char**>(&s), &status);
      } else {
        double v = r * 1.25 + c;
        fits_write_col(fm->get(), TDOUBLE, c + 1, r + 1, 1, 1, &v, &status);
      }
    }
  }
  fits_write_chksum(fm->get(), &status);
  return status == 0 ? *fm->TakeMemory() : std::string();
}

FrameMetadata MakeMeta(const Args& a) {
  FrameMetadata meta;
  for (int i = 0; i < 150; ++i) meta.image_header.push_back(absl::StrFormat("HDRKEY%02d= %d", i, i * 7));
  meta.fibermap_fits = MakeFibermap(a.fibers);
  meta.in_psf = "psf-r0.fits";
  meta.in_img = "preproc-r0.fits";
  meta.wmin = 5760.0;
  meta.wmax = 5760.0 + 0.8 * (a.nwave - 1);
  meta.dw = 0.8;
  return meta;
}

double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Stats {
  double wall = 0, wall_p90 = 0, cpu = 0;
};

Stats Summarise(std::vector<double> wall, std::vector<double> cpu) {
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], wall[std::min(wall.size() - 1, wall.size() * 9 / 10)],
          cpu[cpu.size() / 2]};
}

// One warm-up, then `repeats` timed runs (wall and CPU) of `run`, which may time parts of
// itself into `parts` (name -> seconds of this run); `setup`, when given, runs untimed
// before each.
using Parts = std::vector<std::pair<std::string, double>>;
std::vector<std::pair<std::string, Stats>> Time(const std::string& name, int repeats,
                                                const std::function<void(Parts*)>& run,
                                                const std::function<void()>& setup = nullptr) {
  std::vector<double> wall, cpu;
  std::vector<std::pair<std::string, std::vector<double>>> parts;
  for (int r = 0; r <= repeats; ++r) {
    if (setup) setup();
    Parts p;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = CpuNow();
    run(&p);
    if (r == 0) continue;  // warm-up
    cpu.push_back(CpuNow() - c0);
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (parts.size() <= i) parts.emplace_back(p[i].first, std::vector<double>{});
      parts[i].second.push_back(p[i].second);
    }
  }
  std::vector<std::pair<std::string, Stats>> out{{name, Summarise(wall, cpu)}};
  for (auto& [part, s] : parts) out.emplace_back(name + "." + part, Summarise(s, s));
  return out;
}

#ifdef SPEXD_BENCH_SHA256


using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// tail_whole and tail_progressive (see the top of the file).
void TimeTails(const Args& args, const Frame& frame, const FrameMetadata& meta,
               spexd::core::TaskPool* pool, int threads,
               const std::function<void(std::vector<std::pair<std::string, Stats>>)>& add) {
  namespace core = spexd::core;
  namespace server = spexd::server;
  auto roots = server::DataRoots::Create({args.dir}, "--output_roots");
  if (!roots.ok()) {
    std::fprintf(stderr, "tail: %s\n", std::string(roots.status().message()).c_str());
    return;
  }
  server::DataRoots::WritePolicy policy;
  policy.overwrite = true;
  core::FitsWriteOptions o;
  o.threads = threads;
  o.pool = pool;
  std::vector<core::BundleResult> bundles;
  for (int row = 0, b = 0; row < frame.nspec; row += 25, ++b) {
    bundles.push_back(spexd::testing::FrameRows(frame, b, row, std::min(25, frame.nspec - row)));
  }
  auto write_and_hash = [&](const std::function<absl::StatusOr<std::string>()>& write,
                            const std::function<std::string()>& hash) {
    absl::StatusOr<std::string> written;
    std::string sha;
    core::ParallelFor(pool, 2, 2, [&](int, int task) {
      if (task == 0) written = write();
      else sha = hash();
    });
    if (!written.ok() || sha.empty()) std::abort();
  };
  // .fits, then .fits.gz (the whole file: FrameToFits, then GzipFitsBytes on the pool;
  // progressive: the chunks deflated as the rows come, ProgressiveFrameFile's gzip).
  for (const bool gz : {false, true}) {
    const std::string suffix = gz ? "_gz" : "";
    const std::string path = args.dir + "/frame_write_bench_tail.fits" + (gz ? ".gz" : "");
    add(Time("tail_whole" + suffix, args.repeats, [&](Parts* p) {
      auto t = Clock::now();
      absl::StatusOr<std::string> fits = core::FrameToFits(frame, meta, o);
      if (!fits.ok()) std::abort();
      p->emplace_back("encode", Since(t));
      if (gz) {
        t = Clock::now();
        fits = core::GzipFitsBytes(*fits, pool);
        if (!fits.ok()) std::abort();
        p->emplace_back("gzip", Since(t));
      }
      t = Clock::now();
      write_and_hash([&] { return roots->WriteFile(path, *fits, policy); },
                     [&] { return server::Sha256Hex(*fits); });
      p->emplace_back("write_fsync_sha", Since(t));
    }));
    std::optional<server::DataRoots::PendingOutput> out;
    std::unique_ptr<core::ProgressiveFrameFile> file;
    double rows_seconds = 0;
    auto setup = [&] {
      file.reset();
      out.reset();
      auto created = roots->CreateOutput(path, policy);
      if (!created.ok()) std::abort();
      out.emplace(*std::move(created));
      core::FrameFileShape shape{frame.specmin, frame.nspec, frame.nwave, frame.ndiag, frame.wave};
      file = *core::ProgressiveFrameFile::Create(shape, meta, out->fd(), path, o,
                                                 /*keep_image=*/true, gz);
      const auto t = Clock::now();
      for (std::size_t b = 0; b + 1 < bundles.size(); ++b) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(args.bundle_ms));
        if (!file->AddRows(static_cast<int>(b) * 25, bundles[b]).ok()) std::abort();
      }
      rows_seconds = Since(t) - static_cast<double>(bundles.size() - 1) * args.bundle_ms * 1e-3;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(args.bundle_ms));
    };
    add(Time("tail_progressive" + suffix, args.repeats, [&](Parts* p) {
      auto t = Clock::now();
      const int last = static_cast<int>(bundles.size()) - 1;
      if (!file->AddRows(last * 25, bundles.back()).ok()) std::abort();
      p->emplace_back("rows_before_tail", rows_seconds);
      p->emplace_back("last_rows", Since(t));
      t = Clock::now();
      // As the server: a .gz member is written beside its digest, before the commit.
      if (!file->Finish(frame, nullptr, /*write_rest=*/false).ok()) std::abort();
      p->emplace_back("finish", Since(t));
      if (gz) p->emplace_back("chunks_at_finish", file->gzip_late_chunks());
      if (gz) p->emplace_back("mb_at_finish", static_cast<double>(file->gzip_late_bytes()) / 1e6);
      t = Clock::now();
      write_and_hash(
          [&]() -> absl::StatusOr<std::string> {
            const absl::Status wrote = file->WriteRest();
            if (!wrote.ok()) return wrote;
            return out->Commit();
          },
          [&] { return server::Sha256Hex(file->stored_pieces()); });
      p->emplace_back(gz ? "write_fsync_rename_sha" : "fsync_rename_sha", Since(t));
    }, setup));
    file.reset();
    out.reset();
    std::remove(path.c_str());
  }
}
#endif

// The reference writer's steps (internal/frame_writer_reference.cc) with a timer on each.
void ReferenceParts(const Frame& frame, const FrameMetadata& meta, Parts* parts) {
  using spexd::core::internal::AppendFibermap;
  using spexd::core::internal::AppendScores;
  double to_float = 0, write = 0, checksums = 0;
  auto clock = [](double* acc, const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    *acc += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto convert = [&](const std::vector<double>& v) {
    std::vector<float> out;
    clock(&to_float, [&] { out.assign(v.begin(), v.end()); });
    return out;
  };
  auto checksum = [&](FitsFile& f) {
    clock(&checksums, [&] {
      int status = 0;
      fits_write_chksum(f.get(), &status);
    });
  };
  const long ns = frame.nspec, nw = frame.nwave, nk = 2 * frame.ndiag + 1;
  auto file = FitsFile::CreateMemory("frame");
  FitsFile& f = *file;
  std::vector<float> flux = convert(frame.flux), ivar = convert(frame.ivar),
                     res = convert(frame.rdiags), chi2 = convert(frame.chi2pix);
  clock(&write, [&] {
    (void)f.WriteImage<float>("FLUX", {nw, ns}, flux.data());
    (void)spexd::core::internal::WriteFrameHeader(&f, frame, meta);
  });
  checksum(f);
  clock(&write, [&] { (void)f.WriteImage<float>("IVAR", {nw, ns}, ivar.data()); });
  checksum(f);
  clock(&write, [&] {
    (void)f.WriteImage<uint32_t>("MASK", {nw, ns}, frame.mask.data());
    (void)spexd::core::internal::ScaleCardsInAstropyOrder(&f);
  });
  checksum(f);
  clock(&write, [&] { (void)f.WriteImage<double>("WAVELENGTH", {nw}, frame.wave.data()); });
  checksum(f);
  clock(&write, [&] { (void)f.WriteImage<float>("RESOLUTION", {nw, nk, ns}, res.data()); });
  checksum(f);
  clock(&write, [&] { (void)AppendFibermap(&f, frame, meta); });
  checksum(f);
  clock(&write, [&] { (void)f.WriteImage<float>("CHI2PIX", {nw, ns}, chi2.data()); });
  checksum(f);
  std::vector<spexd::core::FrameScore> scores;
  clock(&write, [&] {
    scores = spexd::core::internal::ScoresToWrite(frame, meta);
    (void)AppendScores(&f, scores, ns);
  });
  checksum(f);
  double take = 0;
  clock(&take, [&] { (void)f.TakeMemory(); });
  *parts = {{"to_float", to_float}, {"cfitsio_write", write}, {"checksums", checksums},
            {"take_memory", take}};
}

// Does FrameToFits give the reference's bytes? Each HDU of the reference is compared with
// the new file made at that HDU's checksum time (a loaded machine's reference may straddle
// a second), as tests/core/frame/frame_writer_bytes_test.cc does.
bool SameBytes(const std::string& reference, const Frame& frame, const FrameMetadata& meta,
               int threads) {
  auto f = FitsFile::OpenMemory(reference.data(), reference.size(), "reference");
  if (!f.ok() || !f->NumHdus().ok()) return false;
  for (int i = 0; i < *f->NumHdus(); ++i) {
    int status = 0;
    LONGLONG head = 0, data = 0, end = 0;
    char value[FLEN_VALUE] = {0}, comment[FLEN_COMMENT] = {0};
    if (!f->MoveToHduIndex(i).ok()) return false;
    fits_get_hduaddrll(f->get(), &head, &data, &end, &status);
    fits_read_keyword(f->get(), "CHECKSUM", value, comment, &status);
    const std::string c = comment;
    if (status != 0 || c.size() < 40) return false;
    spexd::core::FitsWriteOptions o;
    o.threads = threads;
    o.checksum_time = c.substr(c.size() - 19);
    absl::StatusOr<std::string> file = spexd::core::FrameToFits(frame, meta, o);
    if (!file.ok() || file->size() != reference.size() ||
        file->compare(head, end - head, reference, head, end - head) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr, "usage: %s [--fibers N] [--nwave N] [--ndiag N] [--threads N] "
                         "[--repeats N] [--gzip-repeats N] [--dir D] [--json F]\n", argv[0]);
    return 2;
  }
  const int threads = args.threads > 0 ? args.threads : spexd::core::DefaultFitsWriteThreads();
  const Frame frame = MakeFrame(args);
  const FrameMetadata meta = MakeMeta(args);
  absl::StatusOr<std::string> reference = spexd::core::internal::FrameToFitsReference(frame, meta);
  if (!reference.ok()) {
    std::fprintf(stderr, "%s\n", std::string(reference.status().message()).c_str());
    return 1;
  }
  const bool identical = SameBytes(*reference, frame, meta, threads);

  std::vector<std::pair<std::string, Stats>> stats;
  auto add = [&](std::vector<std::pair<std::string, Stats>> s) {
    for (auto& e : s) {
      std::fprintf(stderr, "%-34s %8.4f s (p90 %.4f)  cpu %.4f s\n", e.first.c_str(),
                   e.second.wall, e.second.wall_p90, e.second.cpu);
      stats.push_back(std::move(e));
    }
  };
  if (args.Runs("reference")) {
    add(Time("reference", args.repeats, [&](Parts*) {
      (void)spexd::core::internal::FrameToFitsReference(frame, meta);
    }));
  }
  if (args.Runs("parts")) {
    add(Time("reference_parts", args.repeats, [&](Parts* p) { ReferenceParts(frame, meta, p); }));
  }
  std::unique_ptr<spexd::core::TaskPool> pool = spexd::core::MakeTaskPool(threads - 1);
  for (int t : {1, threads}) {
    if (!args.Runs("new")) break;
    spexd::core::FitsWriteOptions o;
    o.threads = t;
    o.pool = pool.get();
    add(Time(absl::StrCat("frame_to_fits_t", t), args.repeats, [&](Parts* p) {
      spexd::core::FitsWriteTimes times;
      o.times = &times;
      (void)spexd::core::FrameToFits(frame, meta, o);
      *p = {{"scores", times.scores}, {"headers", times.headers}, {"allocate", times.allocate},
            {"encode", times.encode}, {"checksums", times.checksums}};
    }));
    if (t == threads) break;
  }
  if (args.Runs("zero")) {
    add(Time("zero_fill_string", args.repeats, [&](Parts*) {
      std::string s(reference->size(), '\0');
      if (s[s.size() / 2] != 0) std::abort();
    }));
  }
  if (args.gzip_repeats > 0 && args.Runs("gzip")) {
    add(Time("gzip", args.gzip_repeats,
             [&](Parts*) { (void)spexd::core::GzipCompress(*reference); }));
  }
  const std::string path = args.dir + "/frame_write_bench.fits";
  if (args.Runs("write")) {
    add(Time("write_fsync", args.repeats,
             [&](Parts*) { (void)spexd::core::WriteFileAtomically(path, *reference); }));
    std::remove(path.c_str());
  }
#ifdef SPEXD_BENCH_SHA256
  if (args.Runs("sha256")) {
    add(Time("sha256", args.repeats, [&](Parts*) { (void)spexd::server::Sha256Hex(*reference); }));
  }
  if (args.Runs("tail")) TimeTails(args, frame, meta, pool.get(), threads, add);
#endif

  const char* sha = std::getenv("GIT_SHA");
  std::string js = absl::StrFormat(
      "{\"benchmark\": \"frame_write\", \"git_sha\": \"%s\", \"fibers\": %d, \"nwave\": %d, "
      "\"ndiag\": %d, \"threads\": %d, \"hardware_concurrency\": %u, \"repeats\": %d, "
      "\"file_bytes\": %d, \"identical\": %s, \"stages\": {",
      sha != nullptr ? sha : "", args.fibers, args.nwave, args.ndiag, threads,
      std::thread::hardware_concurrency(), args.repeats, reference->size(),
      identical ? "true" : "false");
  for (std::size_t i = 0; i < stats.size(); ++i) {
    absl::StrAppend(&js, i > 0 ? ", " : "",
                    absl::StrFormat("\"%s\": {\"s\": %.4f, \"p90_s\": %.4f, \"cpu_s\": %.4f}",
                                    stats[i].first, stats[i].second.wall,
                                    stats[i].second.wall_p90, stats[i].second.cpu));
  }
  absl::StrAppend(&js, "}}\n");
  if (!args.json.empty()) std::ofstream(args.json) << js;
  std::printf("%s", js.c_str());
  return identical ? 0 : 1;
}
