#include "core/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/plan/spots.h"
#include "core/base/status_macros.h"
#include "core/plan/internal/wavelength_grid.h"

namespace spexd::core {
namespace {

constexpr int16_t kMaskHot = 2;  // desispec ccdmask HOT (spec §2.1 / data README)

// ---- Deterministic random numbers (no std:: distributions: they are implementation
// defined, and the same seed must give the same file everywhere). ----

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
enum Stream : uint64_t { kSkyStream = 1, kFiberStream = 2, kNoiseStream = 3, kDefectStream = 4 };
uint64_t StreamSeed(uint64_t seed, Stream stream, uint64_t index) {
  return SplitMix64(SplitMix64(seed ^ (stream * 0xD1B54A32D192ED03ull)) + index);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double a, double b) { return a + (b - a) * Uniform(); }
  int Int(int lo, int hi) { return lo + static_cast<int>(Uniform() * (hi - lo + 1)); }
  double Normal() {  // Box-Muller, both values used
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }
  // Inversion for small means; for large ones the PTRS transformed rejection of
  // Hörmann (1993), "The transformed rejection method for generating Poisson variables".
  double Poisson(double lam) {
    if (!(lam > 0.0)) return 0.0;
    if (lam < 10.0) {
      double p = std::exp(-lam), s = p, k = 0.0;
      const double u = Uniform();
      while (u > s && k < 1000.0) {
        k += 1.0;
        p *= lam / k;
        s += p;
      }
      return k;
    }
    const double slam = std::sqrt(lam), loglam = std::log(lam);
    const double b = 0.931 + 2.53 * slam;
    const double a = -0.059 + 0.02483 * b;
    const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    const double vr = 0.9277 - 3.6224 / (b - 2.0);
    while (true) {
      const double u = Uniform() - 0.5, v = Uniform();
      const double us = 0.5 - std::abs(u);
      const double k = std::floor((2.0 * a / us + b) * u + lam + 0.43);
      if (us >= 0.07 && v <= vr) return k;
      if (k < 0.0 || (us < 0.013 && v > us)) continue;
      // lgamma_r: std::lgamma writes the global signgam, a data race between the
      // simulator's threads (TSan); the value is the same.
      int sign = 0;
      if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <=
          -lam + k * loglam - ::lgamma_r(k + 1.0, &sign)) {
        return k;
      }
    }
  }

 private:
  std::mt19937_64 gen_;  // fully specified by the standard
  bool has_spare_ = false;
  double spare_ = 0.0;
};

int ThreadCount(const SimOptions& o) { return o.num_threads > 0 ? o.num_threads : HardwareThreads(); }

// ---- Spectra ----

struct Line {
  double mu, sigma, amount;  // amount: photons (emission) or depth (absorption)
};

// Adds amount * N(mu, sigma) (unit area: photons/Å) or, for absorption, records the depth
// profile, over the fine-grid points within 8 sigma.
void AddGaussian(const std::vector<double>& w, const Line& l, bool unit_area, double* out) {
  const auto lo = std::lower_bound(w.begin(), w.end(), l.mu - 8.0 * l.sigma);
  const auto hi = std::upper_bound(w.begin(), w.end(), l.mu + 8.0 * l.sigma);
  const double norm = unit_area ? l.amount / (l.sigma * std::sqrt(2.0 * std::numbers::pi))
                                : l.amount;
  for (auto it = lo; it != hi; ++it) {
    const double t = (*it - l.mu) / l.sigma;
    out[it - w.begin()] += norm * std::exp(-0.5 * t * t);
  }
}

}  // namespace

absl::Status ValidateSimOptions(const Psf& psf, const SimOptions& o) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("simulator options: ", what));
  };
  if (psf.npix_x() <= 0 || psf.npix_y() <= 0) {
    return bad(absl::StrCat("PSF ", psf.source_name(), " has no NPIX_X/NPIX_Y (CCD size)"));
  }
  if (o.fiber_begin < 0 || o.nfibers < 1 || o.fiber_begin > psf.nspec() - o.nfibers) {
    return bad(absl::StrCat("fibres [", o.fiber_begin, ", ", int64_t{o.fiber_begin} + o.nfibers,
                            ") are not a non-empty range within the PSF's ", psf.nspec()));
  }
  if (o.height < 0 || o.height > psf.npix_y() || o.width < 0 || o.width > psf.npix_x()) {
    return bad(absl::StrCat("cut-out ", o.height, " x ", o.width, " is outside the CCD (",
                            psf.npix_y(), " x ", psf.npix_x(), ")"));
  }
  absl::StatusOr<WavelengthGrid> grid = MakeOutputGrid(o.wmin, o.wmax, o.dw);
  if (!grid.ok()) return bad(std::string(grid.status().message()));
  const double lo = std::max({psf.wavemin(), psf.xtrace().wavemin, psf.ytrace().wavemin});
  const double hi = std::min({psf.wavemax(), psf.xtrace().wavemax, psf.ytrace().wavemax});
  if (!o.allow_extrapolation && (grid->wave.front() - o.dw < lo || grid->wave.back() + o.dw > hi)) {
    return bad(absl::StrCat("wavelength grid [", grid->wave.front(), ", ", grid->wave.back(),
                            "] (plus one bin) is outside the PSF domain [", lo, ", ", hi, "]"));
  }
  // Fine-grid arrays are nfibers x nwave x oversample doubles (~150 MB at 16, r frame).
  if (o.oversample < 1 || o.oversample > 16) return bad("oversample must be in [1, 16]");
  if (o.read_noise.size() != 1 && o.read_noise.size() != 4) {
    return bad("read noise needs 1 value or 4 (amps A, B, C, D)");
  }
  for (double rn : o.read_noise) {
    if (!std::isfinite(rn) || rn <= 0.0 || rn > 1e4) {
      return bad("read noise must be positive and finite (ivar = 1/(model + rn²))");
    }
  }
  if (o.num_hot_pixels < 0 || o.num_hot_pixels > 100000) {
    return bad("hot pixel count must be in [0, 100000]");
  }
  if (o.num_threads < 0 || o.num_threads > 1024) return bad("thread count must be in [0, 1024]");
  if (o.camera.empty() || o.camera.size() > 16) return bad("camera must be 1-16 characters");
  return absl::OkStatus();
}

absl::StatusOr<SimSpectra> MakeSimSpectra(const SimOptions& o) {
  SPEXD_ASSIGN_OR_RETURN(WavelengthGrid grid, MakeOutputGrid(o.wmin, o.wmax, o.dw));
  return MakeSimSpectraOnGrid(o, std::move(grid.wave));
}

absl::StatusOr<SimSpectra> MakeSimSpectraOnGrid(const SimOptions& o, std::vector<double> wave) {
  if (o.fiber_begin < 0 || o.nfibers < 0 || o.nfibers > 100000 || o.oversample > 16) {
    return absl::InvalidArgumentError("simulator: bad fibre range or oversample");
  }
  const auto not_ascending = [](double a, double b) { return !(a < b); };
  if (wave.size() < 2 || std::adjacent_find(wave.begin(), wave.end(), not_ascending) != wave.end()) {
    return absl::InvalidArgumentError("simulator: the grid needs 2 or more ascending points");
  }
  SimSpectra s;
  s.fiber_begin = o.fiber_begin;
  s.nfibers = o.nfibers;
  s.wave = std::move(wave);
  s.dwave = GridGradient(s.wave);
  s.oversample = std::max(1, o.oversample);
  const int n = s.oversample;
  for (std::size_t i = 0; i < s.wave.size(); ++i) {
    for (int k = 0; k < n; ++k) {
      // Sub-bin centres; for n = 1 the offset is exactly 0, i.e. the grid point itself.
      const double offset = (k + 0.5) / n - 0.5;
      s.fine_wave.push_back(s.wave[i] + s.dwave[i] * offset);
    }
  }
  s.fine_flux.assign(static_cast<std::size_t>(o.nfibers) * s.fine_wave.size(), 0.0);
  s.objtype.assign(static_cast<std::size_t>(o.nfibers), "TGT");
  s.simtype.assign(static_cast<std::size_t>(o.nfibers), "INPUT");
  for (int f = 0; f < o.nfibers; ++f) {
    s.targetid.push_back(39627000000000000LL + (o.fiber_begin + f));
  }
  return s;
}

void FillTruthFlux(SimSpectra* s) {
  const std::size_t nw = s->wave.size(), n = static_cast<std::size_t>(s->oversample);
  s->flux.assign(static_cast<std::size_t>(s->nfibers) * nw, 0.0);
  for (std::size_t q = 0; q < s->flux.size(); ++q) {
    double sum = 0.0;
    for (std::size_t k = 0; k < n; ++k) sum += s->fine_flux[q * n + k];
    s->flux[q] = n == 1 ? sum : sum / static_cast<double>(n);
  }
}

absl::StatusOr<SimSpectra> GenerateSpectra(const SimOptions& o) {
  SPEXD_ASSIGN_OR_RETURN(SimSpectra s, MakeSimSpectra(o));
  const std::vector<double>& w = s.fine_wave;
  const std::size_t nf = w.size();
  const double w0 = o.wmin, w1 = w.back();
  // Sky common to all fibres: a smooth continuum plus ~40 narrow lines (r-band OH forest
  // strength: hundreds to ~50k photons per line over an exposure).
  std::vector<double> sky(nf, 0.0);
  {
    Rng r(StreamSeed(o.seed, kSkyStream, 0));
    const double level = r.Uniform(15.0, 30.0), tilt = r.Uniform(-0.3, 0.3);
    for (std::size_t k = 0; k < nf; ++k) {
      sky[k] = level * (1.0 + tilt * (w[k] - w0) / (w1 - w0 + 1.0));
    }
    const int nlines = 40;
    for (int i = 0; i < nlines; ++i) {
      const Line l{r.Uniform(w0, w1), r.Uniform(0.45, 0.6), std::pow(10.0, r.Uniform(2.5, 4.7))};
      AddGaussian(w, l, true, sky.data());
    }
  }
  std::vector<double> obj(nf), absorb(nf);
  for (int f = 0; f < o.nfibers; ++f) {
    const std::size_t fi = static_cast<std::size_t>(f);
    Rng r(StreamSeed(o.seed, kFiberStream, static_cast<uint64_t>(o.fiber_begin + f)));
    const double kind = r.Uniform(), throughput = r.Uniform(0.9, 1.1);
    std::fill(obj.begin(), obj.end(), 0.0);
    std::fill(absorb.begin(), absorb.end(), 0.0);
    std::vector<Line> emission;
    if (kind < 0.1) {
      s.simtype[fi] = "SKY";
      s.objtype[fi] = "SKY";
    } else if (kind < 0.5) {  // galaxy: power-law continuum and narrow emission lines
      s.simtype[fi] = "GAL";
      const double amp = r.Uniform(20.0, 200.0), beta = r.Uniform(-1.5, 1.5);
      for (std::size_t k = 0; k < nf; ++k) obj[k] = amp * std::pow(w[k] / 6500.0, beta);
      for (int i = r.Int(2, 6); i > 0; --i) {
        emission.push_back({r.Uniform(w0, w1), r.Uniform(0.8, 2.5),
                            std::pow(10.0, r.Uniform(2.3, 4.3))});
      }
    } else if (kind < 0.85) {  // star: Planck shape and absorption lines
      s.simtype[fi] = "STAR";
      const double amp = r.Uniform(50.0, 1500.0), temp = r.Uniform(3500.0, 12000.0);
      const double c2 = 1.4388e8 / temp;  // hc/(k T) in Å
      for (std::size_t k = 0; k < nf; ++k) {
        const double x = w[k] / 6500.0;
        obj[k] = amp * std::expm1(c2 / 6500.0) / (x * x * x * x * x * std::expm1(c2 / w[k]));
      }
      for (int i = r.Int(3, 8); i > 0; --i) {
        AddGaussian(w, {r.Uniform(w0, w1), r.Uniform(1.0, 4.0), r.Uniform(0.1, 0.6)}, false,
                    absorb.data());
      }
    } else {  // quasar: steep continuum and broad emission lines
      s.simtype[fi] = "QSO";
      const double amp = r.Uniform(10.0, 100.0);
      for (std::size_t k = 0; k < nf; ++k) obj[k] = amp * std::pow(w[k] / 6500.0, -1.5);
      for (int i = r.Int(1, 2); i > 0; --i) {
        emission.push_back({r.Uniform(w0, w1), r.Uniform(15.0, 40.0), r.Uniform(2000.0, 20000.0)});
      }
    }
    for (std::size_t k = 0; k < nf; ++k) obj[k] *= std::max(0.0, 1.0 - absorb[k]);
    for (const Line& l : emission) AddGaussian(w, l, true, obj.data());
    double* out = s.fine_flux.data() + fi * nf;
    for (std::size_t k = 0; k < nf; ++k) out[k] = throughput * (sky[k] + obj[k]);
  }
  FillTruthFlux(&s);
  return s;
}

// Over 100 lines: the frame is built in the order of its physics (photons per bin,
// stamps added per band of CCD rows, then noise and ivar, amplifier quadrants, hot
// pixels), each step filling the arrays the next one reads.
absl::StatusOr<SimFrame> SimulateFrame(const Psf& psf, const SimSpectra& spectra,
                                       const SimOptions& o) {
  SPEXD_RETURN_IF_ERROR(ValidateSimOptions(psf, o));
  const std::size_t nfine = spectra.fine_wave.size();
  const int n = spectra.oversample;
  if (spectra.nfibers != o.nfibers || spectra.fiber_begin != o.fiber_begin ||
      spectra.wave.size() * static_cast<std::size_t>(n) != nfine ||
      spectra.dwave.size() != spectra.wave.size() ||
      spectra.fine_flux.size() != nfine * static_cast<std::size_t>(o.nfibers)) {
    return absl::InvalidArgumentError("simulator: spectra do not match the options");
  }
  SimFrame frame;
  frame.height = o.height > 0 ? o.height : psf.npix_y();
  frame.width = o.width > 0 ? o.width : psf.npix_x();
  const int H = frame.height, W = frame.width;
  const std::size_t npix = static_cast<std::size_t>(H) * static_cast<std::size_t>(W);
  frame.model.assign(npix, 0.0);
  const int nthreads = ThreadCount(o);
  std::unique_ptr<TaskPool> own_pool;
  TaskPool* pool = o.pool;
  if (pool == nullptr) {
    own_pool = MakeTaskPool(nthreads - 1);  // this thread is the last one
    pool = own_pool.get();
  }

  // Photons per fine bin, and each stamp's approximate first row (spec §1.4 step 2) to
  // find the stamps that touch a band of rows.
  std::vector<double> photons(spectra.fine_flux.size());
  std::vector<int32_t> row0(spectra.fine_flux.size());
  for (std::size_t q = 0; q < photons.size(); ++q) {
    const std::size_t k = q % nfine;
    photons[q] = spectra.fine_flux[q] * (n == 1 ? spectra.dwave[k] : spectra.dwave[k / n] / n);
    frame.photons_in += photons[q];
    const int fiber = o.fiber_begin + static_cast<int>(q / nfine);
    row0[q] = StampCorner(psf.Y(fiber, spectra.fine_wave[k]), psf.hsizey());
  }
  // Each task owns a band of rows and adds stamps in (fibre, wavelength) order, so every
  // pixel's sum has the same order whatever the thread count. Stamps crossing a band edge
  // are evaluated by both bands (~8 % extra work at 128 rows).
  constexpr int kBandRows = 128;
  const int nbands = (H + kBandRows - 1) / kBandRows;
  ParallelFor(pool, nthreads, nbands, [&](int, int band) {
    const int y0 = band * kBandRows, y1 = std::min(H, y0 + kBandRows);
    SpotEvaluator spot(psf);
    const int ny = spot.ny(), nx = spot.nx();
    std::vector<double> stamp(static_cast<std::size_t>(ny * nx));
    for (std::size_t q = 0; q < photons.size(); ++q) {
      // One row of margin against rounding differences with the spot's own corner.
      if (photons[q] == 0.0 || row0[q] + ny < y0 || row0[q] - 1 >= y1) continue;
      const int fiber = o.fiber_begin + static_cast<int>(q / nfine);
      int32_t xc = 0, yc = 0;
      spot.Evaluate(fiber, spectra.fine_wave[q % nfine], stamp.data(), &xc, &yc);
      for (int iy = std::max(0, y0 - yc); iy < std::min(ny, y1 - yc); ++iy) {
        double* row = frame.model.data() + static_cast<std::size_t>(yc + iy) * W;
        const double* srow = stamp.data() + iy * nx;
        for (int ix = std::max(0, -xc); ix < std::min(nx, W - xc); ++ix) {
          row[xc + ix] += photons[q] * srow[ix];
        }
      }
    }
  });
  for (double v : frame.model) frame.photons_on_ccd += v;

  // Noise and ivar, one random stream per CCD row so rows can run on any thread.
  frame.image.resize(npix);
  frame.ivar.resize(npix);
  frame.mask.assign(npix, 0);
  // Amplifier quadrants of the whole CCD, also in a cut-out.
  auto read_noise = [&](int y, int x) { return SimReadNoise(o, psf.npix_y(), psf.npix_x(), y, x); };
  ParallelFor(pool, nthreads, H, [&](int, int y) {
    Rng r(StreamSeed(o.seed, kNoiseStream, static_cast<uint64_t>(y)));
    for (int x = 0; x < W; ++x) {
      const std::size_t p = static_cast<std::size_t>(y) * W + x;
      const double m = std::max(frame.model[p], 0.0), rn = read_noise(y, x);
      double value = frame.model[p];
      if (o.noise == SimNoise::kPoisson) value = r.Poisson(m) + rn * r.Normal();
      frame.image[p] = static_cast<float>(value);
      frame.ivar[p] = static_cast<float>(1.0 / (m + rn * rn));
    }
  });

  // Hot pixels (flagged in MASK only, as in the reference data) among the lit columns.
  if (o.num_hot_pixels > 0) {
    const double wmid = spectra.wave[spectra.wave.size() / 2];
    const double xlo = std::max(0.0, psf.X(o.fiber_begin, wmid) - psf.hsizex());
    const double xhi =
        std::min(W - 1.0, psf.X(o.fiber_begin + o.nfibers - 1, wmid) + psf.hsizex());
    Rng r(StreamSeed(o.seed, kDefectStream, 0));
    for (int i = 0; i < o.num_hot_pixels; ++i) {
      SimDefect d;
      d.x = std::clamp(static_cast<int>(r.Uniform(xlo, xhi + 1.0)), 0, W - 1);
      d.y = std::clamp(static_cast<int>(r.Uniform(0.0, H)), 0, H - 1);
      d.electrons = std::round(r.Uniform(5000.0, 30000.0));
      d.mask = kMaskHot;
      const std::size_t p = static_cast<std::size_t>(d.y) * W + d.x;
      frame.image[p] += static_cast<float>(d.electrons);
      frame.mask[p] |= kMaskHot;
      frame.defects.push_back(d);
    }
  }
  return frame;
}

double SimReadNoise(const SimOptions& o, int frame_height, int frame_width, int y, int x) {
  if (o.read_noise.size() == 1) return o.read_noise[0];
  const int amp_y = frame_height / 2, amp_x = frame_width / 2;
  return o.read_noise[static_cast<std::size_t>((y >= amp_y ? 2 : 0) + (x >= amp_x ? 1 : 0))];
}

PreprocImage ToPreprocImage(const SimFrame& frame, MaskPolicy policy) {
  PreprocImage image;
  image.height = frame.height;
  image.width = frame.width;
  image.image.assign(frame.image.begin(), frame.image.end());
  image.ivar.assign(frame.ivar.begin(), frame.ivar.end());
  const std::vector<uint16_t> mask(frame.mask.begin(), frame.mask.end());
  ApplyPixelRules(mask.data(), policy, &image);
  return image;
}

}  // namespace spexd::core
