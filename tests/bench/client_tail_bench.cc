// spexctl's client tail ("the host side keeps up"): the time from the last
// bundle received to the frame file in place, for the whole-file path (rebuild, specmask,
// FrameToFits, WriteFitsAtomically after the stream) and the progressive one
// (client::StreamedFrameFile: rows written as the bundles arrive, then MASK, SCORES,
// headers, fsync, rename). No server: a synthetic frame's bundles are fed to
// RemoteFrameBuilder as spexctl receives them, `--interval_ms` apart (the H100 with 8
// clients delivers a frame's 20 bundles in ~0.6 s). Both files are written with one
// checksum time and compared byte for byte.
//
//   spexd_client_tail_bench [--nspec 500] [--nwave 2326] [--wire float32|float64]
//                           [--interval_ms 30] [--reps 3] [--dir /tmp]
// Also prints, per path, the first part to the file in place: with --interval_ms 0 what
// receiving a whole frame costs the client (parsing, and widening a float64 stream, on
// its one thread).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/spexctl/remote_frame.h"
#include "client/spexctl/streamed_frame_file.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"
#include "tests/frame_fixtures.h"
#include "tests/test_support.h"

namespace {

using Clock = std::chrono::steady_clock;
using spexd::core::Frame;
namespace v1 = spexd::v1;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string Float32Bytes(const std::vector<double>& v, std::size_t begin, std::size_t n) {
  std::string out(n * sizeof(float), '\0');
  for (std::size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(v[begin + i]);
    std::memcpy(out.data() + i * sizeof(float), &f, sizeof(float));
  }
  return out;
}

// The stream of `f` as spexd sends it (values rounded to float32 first on both wires, so
// that the two paths compare; the float32 products carry the mask and scores).
struct Stream {
  v1::FrameHeader header;
  std::vector<v1::BundleData> parts;
  std::vector<v1::FrameProducts> products;
};

Stream MakeStream(Frame f, bool f32, int bundlesize) {
  for (std::vector<double>* v : {&f.flux, &f.ivar, &f.rdiags, &f.chi2pix}) {
    for (double& x : *v) x = static_cast<float>(x);
  }
  spexd::core::ComputeSpecMask(&f);
  Stream s;
  v1::FrameHeader& h = s.header;
  h.set_specmin(f.specmin);
  h.set_nspec(f.nspec);
  h.set_bundlesize(bundlesize);
  h.set_ndiag(f.ndiag);
  h.mutable_wave()->Add(f.wave.begin(), f.wave.end());
  h.set_wavemin(f.wave.front());
  h.set_wavemax(f.wave.back());
  h.set_wavestep(f.wave[1] - f.wave[0]);
  const std::size_t nw = static_cast<std::size_t>(f.nwave);
  const std::size_t nk = static_cast<std::size_t>(2 * f.ndiag + 1);
  for (int b = 0; b * bundlesize < f.nspec; ++b) {
    h.add_bundles(b);
    v1::BundleData p;
    p.set_bundle(b);
    p.set_fiber_begin(f.specmin + b * bundlesize);
    p.set_nfibers(bundlesize);
    p.set_last_part(true);
    const std::size_t at = static_cast<std::size_t>(b) * bundlesize * nw, n = bundlesize * nw;
    if (f32) {
      p.set_flux_f32(Float32Bytes(f.flux, at, n));
      p.set_ivar_f32(Float32Bytes(f.ivar, at, n));
      p.set_chi2pix_f32(Float32Bytes(f.chi2pix, at, n));
      p.set_resolution_f32(Float32Bytes(f.rdiags, at * nk, n * nk));
    } else {
      auto add = [&](const std::vector<double>& v, std::size_t a, std::size_t m, auto* field) {
        field->Add(v.begin() + static_cast<std::ptrdiff_t>(a),
                   v.begin() + static_cast<std::ptrdiff_t>(a + m));
      };
      add(f.flux, at, n, p.mutable_flux());
      add(f.ivar, at, n, p.mutable_ivar());
      add(f.chi2pix, at, n, p.mutable_chi2pix());
      add(f.pixmask_fraction, at, n, p.mutable_pixmask_fraction());
      add(f.rdiags, at * nk, n * nk, p.mutable_resolution());
    }
    s.parts.push_back(std::move(p));
  }
  if (f32) {
    v1::FrameProducts p;
    p.set_row_begin(0);
    p.set_nrows(f.nspec);
    p.mutable_mask()->Add(f.mask.begin(), f.mask.end());
    for (const spexd::core::FrameScore& c : spexd::core::RawScores(f)) {
      v1::ScoreColumn* col = p.add_scores();
      col->set_name(c.name);
      col->set_comment(c.comment);
      col->mutable_values()->Add(c.values.begin(), c.values.end());
    }
    s.products.push_back(std::move(p));
  }
  return s;
}

// Feeds the stream; returns the tail (last bundle in -> file in place), -1 on an error.
double Run(const Stream& s, bool progressive, int interval_ms, const std::string& path) {
  spexd::core::FitsWriteOptions options;
  options.checksum_time = "2026-11-23T18:00:00";
  spexd::client::RemoteFrameBuilder builder;
  std::unique_ptr<spexd::client::StreamedFrameFile> file;
  if (progressive) {
    // As spexctl: a float32 stream's rows go to the file as they came.
    builder.SendBundlesTo(
        [&](int row, std::shared_ptr<const spexd::core::BundleResult> b) {
          return file->AddBundle(row, std::move(b));
        },
        /*keep_spectra=*/false,
        [&](int row, std::shared_ptr<const spexd::core::Float32Rows> rows) {
          return file->AddRows(row, std::move(rows));
        });
  }
  auto fail = [](const absl::Status& st) {
    std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
    return -1.0;
  };
  absl::Status st = builder.OnHeader(s.header);
  if (!st.ok()) return fail(st);
  const bool f32 = !s.products.empty();
  spexd::core::FrameMetadata meta = builder.Metadata("psf.fits", "preproc.fits");
  if (progressive) {
    auto made = spexd::client::StreamedFrameFile::Create(path, s.header, meta, f32, options);
    if (!made.ok()) return fail(made.status());
    file = *std::move(made);
  }
  const Clock::time_point first = Clock::now();
  for (const v1::BundleData& part : s.parts) {
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    st = builder.OnBundle(v1::BundleData(part));
    if (!st.ok()) return fail(st);
  }
  const Clock::time_point t0 = Clock::now();
  for (const v1::FrameProducts& p : s.products) {
    if (!(st = builder.OnProducts(p)).ok()) return fail(st);
  }
  auto frame = builder.Finish();
  if (!frame.ok()) return fail(frame.status());
  std::printf("  %s: products and specmask %.3f s\n", progressive ? "progressive" : "whole-file",
              Seconds(t0, Clock::now()));
  if (progressive) {
    st = file->Commit(*frame, f32 ? &builder.given_scores() : nullptr);
    const auto& t = file->times();
    std::printf("  progressive Commit: rows wait %.3f, MASK/SCORES/headers %.3f, fsync+rename "
                "%.3f s; rows while streaming %.3f s\n", t.rows_wait, t.finish, t.sync, t.rows);
  } else {
    meta = builder.Metadata("psf.fits", "preproc.fits");
    auto bytes = spexd::core::FrameToFits(*frame, meta, options);
    st = bytes.ok() ? spexd::core::WriteFitsAtomically(path, *bytes) : bytes.status();
  }
  if (!st.ok()) return fail(st);
  // With --interval_ms 0 the whole stream arrives at once, as a server's last batch does:
  // then the time from its first part is what the receiving side costs.
  std::printf("  %s: first part to file in place %.3f s\n",
              progressive ? "progressive" : "whole-file", Seconds(first, Clock::now()));
  return Seconds(t0, Clock::now());
}

}  // namespace

int main(int argc, char** argv) {
  int nspec = 500, nwave = 2326, interval_ms = 30, reps = 3;
  std::string wire = "float32", dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--nspec") nspec = std::stoi(v);
    else if (k == "--nwave") nwave = std::stoi(v);
    else if (k == "--interval_ms") interval_ms = std::stoi(v);
    else if (k == "--reps") reps = std::stoi(v);
    else if (k == "--wire") wire = v;
    else if (k == "--dir") dir = v;
    else { std::fprintf(stderr, "unknown flag %s\n", k.c_str()); return 2; }
  }
  const Frame f = spexd::testing::MakeTestFrame(nspec, nwave, 5, 1, /*specials=*/false);
  const Stream s = MakeStream(f, wire == "float32", 25);
  const std::string whole = dir + "/client_tail_whole.fits", prog = dir + "/client_tail_progressive.fits";
  std::printf("%d spectra x %d wavelengths, %s wire, a bundle every %d ms\n", nspec, nwave,
              wire.c_str(), interval_ms);
  bool same = true;
  for (int r = 0; r < reps; ++r) {
    const double a = Run(s, false, interval_ms, whole);
    const double b = Run(s, true, interval_ms, prog);
    if (a < 0 || b < 0) return 1;
    same = same && spexd::testing::ReadBytes(whole) == spexd::testing::ReadBytes(prog);
    std::printf("rep %d: tail whole-file %.3f s, progressive %.3f s\n", r, a, b);
  }
  std::printf("files byte for byte identical: %s\n", same ? "yes" : "NO");
  std::remove(whole.c_str());
  std::remove(prog.c_str());
  return same ? 0 : 1;
}
