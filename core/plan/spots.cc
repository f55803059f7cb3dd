#include "core/plan/spots.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/numerics/gauss_hermite.h"
#include "core/numerics/legendre.h"
#include "core/base/parallel_for.h"
#include "core/base/prefault.h"

namespace spexd::core {

// Per-thread scratch for one stamp; sized once from the PSF header.
struct SpotEvaluator::Workspace {
  std::vector<double> px;  // [ghdegx+1][nx] pixel-integrated x basis
  std::vector<double> py;  // [ghdegy+1][ny]
  std::vector<double> t;   // [ghdegy+1][nx] = sum_i GH[i][j] * px_i
  std::vector<double> gh;  // [ghdegy+1][ghdegx+1] (GH-i-j at gh[j*(ghdegx+1)+i])
  std::vector<double> edge_scratch;
  std::vector<double> basis;  // Legendre row L_0..L_legdeg (spec §1.3)

  explicit Workspace(const Psf& psf) {
    basis.resize(static_cast<std::size_t>(psf.legdeg() + 1));
    const int nx = 2 * psf.hsizex() + 1, ny = 2 * psf.hsizey() + 1;
    px.resize(static_cast<std::size_t>((psf.ghdegx() + 1) * nx));
    py.resize(static_cast<std::size_t>((psf.ghdegy() + 1) * ny));
    t.resize(static_cast<std::size_t>((psf.ghdegy() + 1) * nx));
    gh.resize(static_cast<std::size_t>((psf.ghdegx() + 1) * (psf.ghdegy() + 1)));
    // [edge][1 + deg] terms of the longer axis (AxisBasis).
    const int nedges = std::max(nx, ny) + 1;
    const int terms = std::max(psf.ghdegx(), psf.ghdegy()) + 1;
    edge_scratch.resize(static_cast<std::size_t>(nedges * terms));
  }
};

namespace {
using SpotWorkspace = SpotEvaluator::Workspace;

// Pixel-integrated Gauss-Hermite basis along one axis (extraction-spec §1.4 steps 4-6):
// out[m*n + k] for degree m = 0..deg and pixel k = 0..n-1, n = 2*hsize+1. `edges` holds
// (n + 1) * (1 + deg) doubles of scratch.
void AxisBasis(int hsize, double d, double sigma, int deg, double* edges, double* out) {
  const int n = 2 * hsize + 1;
  for (int k = 0; k <= n; ++k) {
    double* e = edges + k * (1 + deg);
    EdgeTerms(StampEdge(k, hsize, d, sigma), deg, e, e + 1);
  }
  for (int m = 0; m <= deg; ++m) {
    for (int k = 0; k < n; ++k) out[m * n + k] = PixelBasis(edges, deg, m, k);
  }
}

// Stamp from evaluated parameters (spec §1.4). `ws.gh` must hold GH-i-j.
void StampFromParams(const Psf& psf, double x, double y, double sigx, double sigy,
                     SpotWorkspace& ws, double* stamp, int32_t* xc, int32_t* yc) {
  const int hx = psf.hsizex(), hy = psf.hsizey();
  const int nx = 2 * hx + 1, ny = 2 * hy + 1;
  const int dgx = psf.ghdegx(), dgy = psf.ghdegy();
  *xc = StampCorner(x, hx);
  *yc = StampCorner(y, hy);
  const double dx = SubPixelOffset(x, *xc, hx);
  const double dy = SubPixelOffset(y, *yc, hy);
  AxisBasis(hx, dx, sigx, dgx, ws.edge_scratch.data(), ws.px.data());
  AxisBasis(hy, dy, sigy, dgy, ws.edge_scratch.data(), ws.py.data());
  // S = Py^T GH Px factored as two small products (spec "Decisions": summation order free).
  for (int j = 0; j <= dgy; ++j) {
    double* tj = ws.t.data() + j * nx;
    std::fill(tj, tj + nx, 0.0);
    for (int i = 0; i <= dgx; ++i) {
      const double c = ws.gh[static_cast<std::size_t>(j * (dgx + 1) + i)];
      const double* pxi = ws.px.data() + i * nx;
      for (int k = 0; k < nx; ++k) tj[k] += c * pxi[k];
    }
  }
  double sum = 0.0;
  for (int iy = 0; iy < ny; ++iy) {
    double* row = stamp + iy * nx;
    std::fill(row, row + nx, 0.0);
    for (int j = 0; j <= dgy; ++j) {
      const double pyj = ws.py[static_cast<std::size_t>(j * ny + iy)];
      const double* tj = ws.t.data() + j * nx;
      for (int k = 0; k < nx; ++k) row[k] += pyj * tj[k];
    }
    for (int k = 0; k < nx; ++k) {
      row[k] = std::max(row[k], 0.0);  // spec §1.4 step 8: clip, then normalise
      sum += row[k];
    }
  }
  // A stamp that is entirely clipped (only possible far outside the PSF domain) stays
  // zero instead of becoming NaN, which would poison a whole patch solve.
  if (sum > 0.0) {
    for (int p = 0; p < nx * ny; ++p) stamp[p] /= sum;
  }
}

// All parameters of one (fibre, wavelength) by the Vandermonde sum of spec §1.3, given
// the basis row `basis` of the PSF-table domain.
void EvaluateParams(const Psf& psf, int fiber, const double* basis, double* sigx, double* sigy,
                    SpotWorkspace& ws) {
  auto param = [&](int p) {
    const LegendreTable& t = psf.param_table(p);
    return LegendreDot(basis, t.coeff.data() + static_cast<std::size_t>(fiber) * t.ncoeff,
                       t.ncoeff);
  };
  *sigx = param(Psf::kGhSigX);
  *sigy = param(Psf::kGhSigY);
  for (int j = 0; j <= psf.ghdegy(); ++j) {
    for (int i = 0; i <= psf.ghdegx(); ++i) {
      ws.gh[static_cast<std::size_t>(j * (psf.ghdegx() + 1) + i)] = param(psf.GhIndex(i, j));
    }
  }
}

}  // namespace

SpotEvaluator::SpotEvaluator(const Psf& psf) : psf_(psf), ws_(std::make_unique<Workspace>(psf)) {}
SpotEvaluator::~SpotEvaluator() = default;

void SpotEvaluator::Evaluate(int fiber, double wave, double* stamp, int32_t* xc, int32_t* yc) {
  // All PSF-table parameters share one domain, so one Legendre row serves them all.
  LegendreVander(ReducedWavelength(wave, psf_.wavemin(), psf_.wavemax()), psf_.legdeg(),
                 ws_->basis.data());
  double sigx = 0, sigy = 0;
  EvaluateParams(psf_, fiber, ws_->basis.data(), &sigx, &sigy, *ws_);
  StampFromParams(psf_, psf_.X(fiber, wave), psf_.Y(fiber, wave), sigx, sigy, *ws_, stamp, xc,
                  yc);
}

void EvaluateSpot(const Psf& psf, int fiber, double wave, double* stamp, int32_t* xc,
                  int32_t* yc) {
  SpotEvaluator(psf).Evaluate(fiber, wave, stamp, xc, yc);
}

Spots EvaluateSpots(const Psf& psf, int fiber_begin, int nfibers,
                    const std::vector<double>& waves, TaskPool* pool) {
  Spots spots;
  spots.fiber_begin = fiber_begin;
  spots.nfibers = nfibers;
  spots.nwave = static_cast<int>(waves.size());
  spots.ny = 2 * psf.hsizey() + 1;
  spots.nx = 2 * psf.hsizex() + 1;
  const std::size_t ntotal = static_cast<std::size_t>(nfibers) * waves.size();
  const std::size_t stamp_size = static_cast<std::size_t>(spots.ny * spots.nx);
  // Reserved (not yet touched) and advised before the zero fill, so that the tens of MB a
  // bundle's stamps take are faulted in as huge pages: every patch reads ~0.7 MB of them
  // scattered over the bundle's stamps (2-core host, 4 KiB pages: projection 0.24-0.48 s a
  // 50-fibre frame, 0.07-0.10 s with huge pages).
  spots.values.reserve(ntotal * stamp_size);
  AdviseHugePages(spots.values.data(), ntotal * stamp_size * sizeof(double));
  spots.values.resize(ntotal * stamp_size);
  spots.xc.resize(ntotal);
  spots.yc.resize(ntotal);
  if (ntotal == 0) return spots;

  // Each (fibre, wavelength) stamp is independent, so splitting the flat index range
  // into chunks gives bit-identical results for any number of workers. A chunk is large
  // enough to amortise claiming it; each worker keeps one evaluator (its scratch).
  constexpr std::size_t kStampsPerChunk = 2048;
  const int nchunks = static_cast<int>((ntotal + kStampsPerChunk - 1) / kStampsPerChunk);
  const int max_workers = pool != nullptr ? pool->num_threads() + 1 : 1;
  std::vector<std::unique_ptr<SpotEvaluator>> evaluators(static_cast<std::size_t>(max_workers));
  ParallelFor(pool, max_workers, nchunks, [&](int worker, int chunk) {
    std::unique_ptr<SpotEvaluator>& evaluator = evaluators[static_cast<std::size_t>(worker)];
    if (evaluator == nullptr) evaluator = std::make_unique<SpotEvaluator>(psf);
    const std::size_t begin = static_cast<std::size_t>(chunk) * kStampsPerChunk;
    const std::size_t end = std::min(ntotal, begin + kStampsPerChunk);
    for (std::size_t q = begin; q < end; ++q) {
      const int f = static_cast<int>(q / waves.size());
      const std::size_t w = q % waves.size();
      evaluator->Evaluate(fiber_begin + f, waves[w], spots.values.data() + q * stamp_size,
                          &spots.xc[q], &spots.yc[q]);
    }
  });
  return spots;
}

}  // namespace spexd::core
