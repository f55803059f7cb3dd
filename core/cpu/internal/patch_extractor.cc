#include "core/cpu/internal/patch_extractor.h"

#include <algorithm>
#include <cmath>

#include "core/cpu/internal/band_inverse.h"
#include "core/cpu/internal/band_cholesky.h"
#include "core/cpu/internal/decorrelate_products.h"
#include "core/cpu/internal/lapack.h"
#include "core/cpu/internal/normal_equations.h"
#include "core/cpu/internal/step_timer.h"
#include "core/numerics/patch_numerics.h"

namespace spexd::core {
namespace {

using internal::StepTimer;

constexpr std::size_t kOne = 1;  // hidden Fortran string length

// M by tiles of stamps (tile_normal_equations.h) where the CPU has AVX-512, by runs of
// pixels (normal_equations.h) elsewhere.
bool UseTileNormalEquations() {
  static const bool tiles = internal::WidestSimdLevel() == internal::SimdLevel::kAvx512;
  return tiles;
}

bool AllFinite(const double* v, int n) {
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return false;
  }
  return true;
}

}  // namespace

PatchWorkspace::PatchWorkspace(const PatchPlan& plan) {
  const std::size_t n = static_cast<std::size_t>(plan.max_n);
  const std::size_t nt = static_cast<std::size_t>(plan.nwavetot);
  const std::size_t npix = static_cast<std::size_t>(plan.max_npix);
  pix_start.resize(npix + 1);
  pix_fill.resize(npix);
  win_image.resize(npix);
  win_ivar.resize(npix);
  const std::size_t max_entries = n * plan.stamp_ny * plan.stamp_nx;
  entry_col.resize(max_entries);
  entry_val.resize(max_entries);
  m.resize(n * n);  // M, then its factor, in dense lower storage (band_cholesky.h)
  cfull.resize(n * n);
  zblock.resize(static_cast<std::size_t>(  // kd < n
      BandInverseScratchSize(static_cast<int>(n), static_cast<int>(nt))));
  b.resize(n);
  fw.resize(n);
  x.resize(n);
  w.resize(n);
  decor.resize(4 * nt);
  decor_band.resize(static_cast<std::size_t>(2 * plan.ndiag + 1) * plan.nwavestep);
  block_vals.resize(static_cast<std::size_t>(plan.nper) * nt);
  block_vecs.resize(static_cast<std::size_t>(plan.nper) * nt * nt);
  // dsyevd workspace query for the block size (jobz = V).
  int nti = static_cast<int>(nt), lwork = -1, liwork = -1, info = 0, iw = 0;
  double wq = 0;
  dsyevd_("V", "L", &nti, block_vecs.data(), &nti, block_vals.data(), &wq, &lwork, &iw, &liwork,
          &info, kOne, kOne);
  lapack_work.resize(static_cast<std::size_t>(std::max(wq, 1.0)) + 1);
  lapack_iwork.resize(static_cast<std::size_t>(std::max(iw, 1)) + 1);
  lanes = std::make_unique<internal::LaneEigen>(static_cast<int>(nt));
  relative = std::make_unique<internal::RelativeEigen>(static_cast<int>(nt));
  const std::size_t core = static_cast<std::size_t>(plan.nper) * plan.nwavestep;
  flux.resize(n);
  ivar.resize(n);
  rdiag.resize(core * (2 * plan.ndiag + 1));
  pixmask.resize(n);
  chi2.resize(n);
  model_col.resize(n);
}

void PatchExtractor::BuildSparseA(const PatchDesc& d, const Spots& spots,
                                  PatchWorkspace* ws) const {
  // Column q = s*nwavetot + w holds the stamp of (fiber0+s, wave0+w) at its corner
  // relative to the window; rows outside the (trimmed) window are dropped (spec §2.7).
  const int nt = plan_.nwavetot, sny = spots.ny, snx = spots.nx;
  const int npix = d.ny * d.nx;
  const int f_local0 = d.fiber0 - spots.fiber_begin;
  // Raw pointers: stores through the vectors' data would otherwise make the compiler
  // reload their pointers for every value.
  int32_t* const start = ws->pix_start.data();
  int32_t* const fill = ws->pix_fill.data();
  int32_t* const col = ws->entry_col.data();
  double* const val = ws->entry_val.data();
  ws->stamp_ny = sny;
  ws->stamp_nx = snx;
  ws->stamp_ptr.resize(d.n);
  ws->stamp_oy.resize(d.n);
  ws->stamp_ox.resize(d.n);
  for (int q = 0; q < d.n; ++q) {
    const int fib = f_local0 + q / nt, fw = d.wave0 + q % nt;
    ws->stamp_ptr[q] = spots.stamp(fib, fw);
    ws->stamp_oy[q] = spots.corner_y(fib, fw) - d.y0;
    ws->stamp_ox[q] = spots.corner_x(fib, fw) - d.x0;
  }
  // Calls f(q, stamp row, first pixel of the row) for every stamp row inside the window.
  auto for_each_row = [&](auto&& f) {
    for (int q = 0; q < d.n; ++q) {
      const int s = q / nt, w = q % nt;
      const int fib = f_local0 + s, fw = d.wave0 + w;
      const double* stamp = spots.stamp(fib, fw);
      const int oy = spots.corner_y(fib, fw) - d.y0;
      const int ox = spots.corner_x(fib, fw) - d.x0;
      const int iy0 = std::max(0, -oy), iy1 = std::min(sny, d.ny - oy);
      for (int iy = iy0; iy < iy1; ++iy) f(q, stamp + iy * snx, (oy + iy) * d.nx + ox);
    }
  };
  // Pass 1: entries per pixel (clipped stamp pixels, exactly 0, contribute nothing), then
  // their offsets; pass 2: the entries, by q within each pixel.
  std::fill(start, start + npix + 1, 0);
  for_each_row([&](int, const double* row, int pbase) {
    for (int ix = 0; ix < snx; ++ix) start[pbase + ix + 1] += row[ix] != 0.0 ? 1 : 0;
  });
  for (int p = 0; p < npix; ++p) start[p + 1] += start[p];
  std::copy(start, start + npix, fill);
  for_each_row([&](int q, const double* row, int pbase) {
    for (int ix = 0; ix < snx; ++ix) {
      if (row[ix] == 0.0) continue;
      const int e = fill[pbase + ix]++;
      col[e] = q;
      val[e] = row[ix];
    }
  });
}

// The stages below follow the GPU pipeline (cuda/host/patch_pipeline.cc): normal equations and
// regularisation, Cholesky factor and solve, C's core diagonal blocks, their inverse
// square roots with the decorrelated products, then the outputs. On the CPU M, its
// factor and C are kept to the band (the GPU works on dense tiles).
void PatchExtractor::GatherWindow(const PatchDesc& d, const ImagePlanes& planes,
                                  PatchWorkspace* ws) const {
  const std::size_t W = static_cast<std::size_t>(plan_.image_width);
  auto gather = [&](const auto* image, const auto* ivar) {
    for (int iy = 0; iy < d.ny; ++iy) {
      const std::size_t from = static_cast<std::size_t>(d.y0 + iy) * W + d.x0;
      const std::size_t to = static_cast<std::size_t>(iy) * d.nx;
      std::copy(image + from, image + from + d.nx, ws->win_image.data() + to);
      std::copy(ivar + from, ivar + from + d.nx, ws->win_ivar.data() + to);
    }
  };
  if (planes.image32 != nullptr) {
    gather(planes.image32, planes.ivar32);
  } else {
    gather(planes.image, planes.ivar);
  }
}

bool PatchExtractor::SolveToCoreBlocks(const PatchDesc& d, double regularize,
                                       PatchWorkspace* ws) const {
  StepTimer timer;
  BuildNormalEquations(d, ws);
  Regularize(d.n, regularize, ws);
  timer.Lap(&ws->steps_.normal_eq);
  if (!CholeskySolve(d.n, ws)) return false;
  timer.Lap(&ws->steps_.cholesky);
  BandInverse(d, d.core_row, ws);
  timer.Lap(&ws->steps_.inverse);
  return true;
}

bool PatchExtractor::Solve(const PatchDesc& d, double regularize, PatchWorkspace* ws) const {
  if (!SolveToCoreBlocks(d, regularize, ws)) return false;
  StepTimer timer;
  if (!DecomposeCoreBlocks(d, ws)) return false;
  DecorrelateCore(d, ws->block_vals.data(), ws->block_vecs.data(), ws->x.data(), ws);
  timer.Lap(&ws->steps_.decorrelate);
  return KeptOutputsFinite(d, *ws);
}

void PatchExtractor::BuildNormalEquations(const PatchDesc& d, PatchWorkspace* ws) const {
  const int n = d.n;
  const double* image = ws->win_image.data();
  const double* ivar = ws->win_ivar.data();
  // Bandwidth of M: the widest span of unknowns on one weighted pixel (entries are sorted
  // by q). In fibre-major order stamps couple fibres s +- 2 only: kd is ~160 of n ~ 500.
  int kd = 0;
  for (int iy = 0; iy < d.ny; ++iy) {
    const std::size_t row = static_cast<std::size_t>(iy) * d.nx;
    for (int ix = 0; ix < d.nx; ++ix) {
      const int p = iy * d.nx + ix;
      const int e0 = ws->pix_start[p], e1 = ws->pix_start[p + 1];
      if (e1 > e0 && ivar[row + ix] != 0.0) {
        kd = std::max(kd, ws->entry_col[e1 - 1] - ws->entry_col[e0]);
      }
    }
  }
  ws->kd = kd;
  // M in dense lower storage (leading dimension n) for the blocked band Cholesky
  // (band_cholesky.h): zero within its reach of the diagonal, the band then summed in.
  double* m = ws->m.data();
  const int reach = internal::BandCholeskyReach(kd);
  for (int q = 0; q < n; ++q) {
    double* col = m + static_cast<std::size_t>(q) * n;
    std::fill(col + q, col + std::min(n, q + reach + 1), 0.0);
  }
  std::fill(ws->b.begin(), ws->b.begin() + n, 0.0);
  std::fill(ws->fw.begin(), ws->fw.begin() + n, 0.0);
  // M = A^T diag(v) A (M[i, j], i >= j, at m[i + j * n]), b = A^T diag(v) d, fw = A^T v
  // (spec §2.8): with AVX-512, M by 8 x 8 tiles of stamps (tile_normal_equations.h) and b,
  // fw pixel by pixel; else runs of pixels in the same stamps summed in SIMD vectors first
  // (normal_equations.h, whose "kd" is the storage's leading dimension).
  const internal::PixelEntries entries{ws->pix_start.data(), ws->entry_col.data(),
                                       ws->entry_val.data()};
  const internal::PixelWindow window{d.ny, d.nx, image, ivar};
  if (UseTileNormalEquations()) {
    const internal::PatchStamps stamps{n, plan_.nwavetot, ws->stamp_ny, ws->stamp_nx, d.ny, d.nx,
                                       ws->stamp_ptr.data(), ws->stamp_oy.data(),
                                       ws->stamp_ox.data(), image, ivar};
    internal::TileNormalEquations(stamps, n, reach, m, ws->b.data(), ws->fw.data(), &ws->tiles);
  } else {
    internal::AccumulateNormalEquations(entries, window, n, m, ws->b.data(), ws->fw.data(),
                                        &ws->normal_eq);
  }
}

void PatchExtractor::Regularize(int n, double regularize, PatchWorkspace* ws) const {
  // Bad bins per the compat rule (spec §2.8, §2.17; core/numerics/patch_numerics.h).
  double maxfw = 0;
  for (int q = 0; q < n; ++q) maxfw = std::max(maxfw, ws->fw[q]);
  const double minweight = MinWeight(maxfw);
  const bool cpu = options_.compat == Compat::kCpu;
  const std::size_t diag = static_cast<std::size_t>(n) + 1;  // dense storage, ld = n
  for (int q = 0; q < n; ++q) {
    ws->m[q * diag] += DiagonalRegularization(ws->fw[q], minweight, regularize, cpu);
  }
}

bool PatchExtractor::CholeskySolve(int n, PatchWorkspace* ws) const {
  // Any backward-stable SPD solver will do (spec §2.9): a blocked band Cholesky, n kd^2
  // instead of n^3 / 3 (the factor of a band matrix has no fill outside the band).
  if (!internal::BandCholeskyFactor(n, ws->kd, ws->m.data(), n, &ws->cholesky_scratch)) {
    return false;
  }
  // The health estimate from the factor's diagonal: one pass over n values.
  ws->condition_ = FactorConditionEstimate(ws->m.data(), n, static_cast<long>(n) + 1);
  std::copy(ws->b.begin(), ws->b.begin() + n, ws->x.begin());
  internal::BandCholeskySolve(n, ws->kd, ws->m.data(), n, ws->x.data());
  return AllFinite(ws->x.data(), n);
}

void PatchExtractor::BandInverse(const PatchDesc& d, int first, PatchWorkspace* ws) const {
  // Only C's diagonal blocks of the core spectra are needed (spec §2.10); selected
  // inversion inside the band from the last spectrum backwards (band_inverse.h).
  // Recursion blocks of half a spectrum where that still covers each spectrum's block
  // (kd >= nt): fewer flops in the trapezoids (measured 12 % less time than whole spectra).
  const int nt = plan_.nwavetot, split = nt % 2 == 0 && ws->kd >= nt ? 2 : 1;
  BandInverseDiagonalBlocks(BandFactor{ws->m.data(), d.n, d.n, ws->kd}, nt / split, first * split,
                            ws->cfull.data(), d.n, ws->zblock.data());
}

void PatchExtractor::Decorrelate(const PatchDesc& d, int s, const double* vals, const double* c,
                                 const double* x, PatchWorkspace* ws) const {
  // Q_s = C_ss^{-1/2} = V diag(1/sqrt(w)) V^T (spec §2.10 step 2), eigenvalues clipped
  // per compat (§2.17), from the block's decomposition (values, vectors column-major).
  const int nt = plan_.nwavetot;
  double lmax = 0;
  for (int i = 0; i < nt; ++i) lmax = std::max(lmax, vals[i]);
  const bool cpu = options_.compat == Compat::kCpu;
  double* g = ws->decor.data();
  for (int j = 0; j < nt; ++j) g[j] = 1.0 / std::sqrt(ClippedEigenvalue(vals[j], lmax, cpu));
  // Q's row sums, Q x and its resolution band, from V without forming Q
  // (decorrelate_products.h); then R = Q / rowsum, ivar = rowsum^2, flux = R x (spec §2.10
  // step 3) and Rdiags[k][w] = R[i-ndiag+k][i] (§2.11).
  const int base = s * nt;
  const int out_s = s - d.core_row;
  const int nd = plan_.ndiag, nk = 2 * nd + 1, i0 = plan_.wavepad_eff;
  double* qx = g + nt;
  double* band = ws->decor_band.data();
  internal::DecorrelateProducts(
      internal::DecorrelateBlock{c, g, x + base, nt, i0, plan_.nwavestep, nd}, ws->w.data() + base,
      qx, band, g + 2 * nt);
  for (int i = 0; i < nt; ++i) {
    const double r = ws->w[base + i];
    ws->ivar[base + i] = r * r;
    ws->flux[base + i] = qx[i] / r;
  }
  for (int w = 0; w < plan_.nwavestep; ++w) {
    const int i = i0 + w;
    for (int kk = 0; kk < nk; ++kk) {
      const int row = i - nd + kk;
      ws->rdiag[(static_cast<std::size_t>(out_s) * nk + kk) * plan_.nwavestep + w] =
          band[static_cast<std::size_t>(kk) * plan_.nwavestep + w] / ws->w[base + row];
    }
  }
}

void PatchExtractor::DecorrelateCore(const PatchDesc& d, const double* vals, const double* vecs,
                                     const double* x, PatchWorkspace* ws) const {
  const std::size_t nt = static_cast<std::size_t>(plan_.nwavetot);
  for (int k = 0; k < plan_.nper; ++k) {
    Decorrelate(d, d.core_row + k, vals + k * nt, vecs + k * nt * nt, x, ws);
  }
}

bool PatchExtractor::KeptOutputsFinite(const PatchDesc& d, const PatchWorkspace& ws) const {
  // The NaN check of spec §2.15 on everything the patch keeps.
  const int nt = plan_.nwavetot;
  for (int s = d.core_row; s < d.core_row + plan_.nper; ++s) {
    const int i0 = s * nt + plan_.wavepad_eff;
    if (!AllFinite(ws.flux.data() + i0, d.nkeep) || !AllFinite(ws.ivar.data() + i0, d.nkeep)) {
      return false;
    }
  }
  const std::size_t nrd =
      static_cast<std::size_t>(plan_.nper) * (2 * plan_.ndiag + 1) * plan_.nwavestep;
  return AllFinite(ws.rdiag.data(), static_cast<int>(nrd));
}

void PatchExtractor::PixelOutputs(const PatchDesc& d, const double* x, const PatchWorkspace& ws,
                                  double* pixmask, double* num, double* wgt) const {
  const int n = d.n, npix = d.ny * d.nx;
  const double* image = ws.win_image.data();
  const double* ivar = ws.win_ivar.data();
  const bool cpu = options_.compat == Compat::kCpu;
  const double psferr = options_.psferr;
  std::fill(pixmask, pixmask + n, 0.0);
  std::fill(num, num + n, 0.0);
  std::fill(wgt, wgt + n, 0.0);
  const int32_t* const start = ws.pix_start.data();
  const int32_t* const col = ws.entry_col.data();
  const double* const val = ws.entry_val.data();
  // Per pixel: model m = A x of all unknowns, then chi2 per the compat rule (§2.11).
  for (int p = 0; p < npix; ++p) {
    const double v = ivar[p], pix = image[p];
    const int e0 = start[p], e1 = start[p + 1];
    double mp = 0;
    for (int e = e0; e < e1; ++e) mp += val[e] * x[col[e]];
    double chi2 = 0;
    bool weighted = false;
    if (cpu) {
      const double mivar = std::pow(mp * psferr + 1e-32, -2.0);
      double tivar = 0;
      if (mivar > 0 && v > 0) tivar = 1.0 / (1.0 / mivar + 1.0 / v);
      const double chi = (pix - mp) * std::sqrt(tivar);
      chi2 = chi * chi;
      weighted = tivar > 0;
    } else {
      const double sm = psferr * mp;
      double tivar = 0;
      if (sm > 0 && v > 0) tivar = 1.0 / (sm * sm + 1.0 / v);
      chi2 = (pix - mp) * (pix - mp) * tivar;
      weighted = chi2 > 0;
    }
    // The pixel's two conditions outside its entries' loops (the same sums).
    if (v == 0.0) {
      for (int e = e0; e < e1; ++e) pixmask[col[e]] += val[e];
    }
    if (weighted) {
      for (int e = e0; e < e1; ++e) {
        num[col[e]] += val[e] * chi2;
        wgt[col[e]] += val[e];
      }
    }
  }
}

void PatchExtractor::FillBundle(const PatchDesc& d, const PatchWorkspace& ws, const double* pixmask,
                                const double* num, const double* wgt, BundleResult* bundle) const {
  const int nt = plan_.nwavetot;
  // Kept core columns -> bundle rows/columns (spec §2.12).
  const int nd = plan_.ndiag, nk = 2 * nd + 1;
  for (int s = d.core_row; s < d.core_row + plan_.nper; ++s) {
    const int out_s = s - d.core_row;
    const std::size_t row = static_cast<std::size_t>(d.out_row - bundle->bundle * plan_.bundlesize + out_s);
    for (int w = 0; w < d.nkeep; ++w) {
      const int q = s * nt + plan_.wavepad_eff + w;
      const std::size_t o = row * bundle->nwave + d.out_col + w;
      bundle->flux[o] = ws.flux[q];
      bundle->ivar[o] = ws.ivar[q];
      bundle->pixmask_fraction[o] = pixmask[q];
      bundle->chi2pix[o] = wgt[q] != 0 ? num[q] / wgt[q] : 0.0;
      for (int kk = 0; kk < nk; ++kk) {
        bundle->rdiags[(row * nk + kk) * bundle->nwave + d.out_col + w] =
            ws.rdiag[(static_cast<std::size_t>(out_s) * nk + kk) * plan_.nwavestep + w];
      }
    }
  }
}

void PatchExtractor::WriteOutputs(const PatchDesc& d, PatchWorkspace* ws, BundleResult* bundle,
                                  std::vector<double>* model_window) const {
  // fw is no longer needed: it holds the chi2 weights.
  PixelOutputs(d, ws->x.data(), *ws, ws->pixmask.data(), ws->chi2.data(), ws->fw.data());
  FillBundle(d, *ws, ws->pixmask.data(), ws->chi2.data(), ws->fw.data(), bundle);
  if (model_window != nullptr) ModelWindow(d, ws, model_window);
}

void PatchExtractor::ModelWindow(const PatchDesc& d, PatchWorkspace* ws,
                                 std::vector<double>* model_window) const {
  const int n = d.n, nt = plan_.nwavetot, npix = d.ny * d.nx;
  const bool cpu = options_.compat == Compat::kCpu;
  // Model of the core bins with the R-convolved flux; the GPU path zeroes bins with
  // ivar = 0 (§2.11, §2.17).
  std::fill(ws->model_col.begin(), ws->model_col.begin() + n, 0.0);
  for (int s = d.core_row; s < d.core_row + plan_.nper; ++s) {
    for (int w = 0; w < plan_.nwavestep; ++w) {
      const int q = s * nt + plan_.wavepad_eff + w;
      double f = ws->flux[q];
      if (!cpu && !(ws->ivar[q] > 0)) f = 0;
      ws->model_col[q] = f;
    }
  }
  model_window->assign(npix, 0.0);
  for (int p = 0; p < npix; ++p) {
    double mp = 0;
    for (int e = ws->pix_start[p]; e < ws->pix_start[p + 1]; ++e) {
      mp += ws->entry_val[e] * ws->model_col[ws->entry_col[e]];
    }
    (*model_window)[p] = mp;
  }
}

PatchOutcome PatchExtractor::Extract(const PatchDesc& d, const Spots& spots,
                                     const ImagePlanes& planes, PatchWorkspace* ws,
                                     BundleResult* bundle,
                                     std::vector<double>* model_window) const {
  if (d.skipped != kSkipNone) return PatchOutcome::kSkipped;
  StepTimer timer;
  BuildSparseA(d, spots, ws);
  GatherWindow(d, planes, ws);
  timer.Lap(&ws->steps_.projection);
  PatchOutcome outcome = PatchOutcome::kExtracted;
  bool ok = Solve(d, options_.regularize, ws);
  // NaN retry scoped to this patch (spec "Decisions", §2.15).
  if (!ok && options_.regularize == 0.0) {
    ok = Solve(d, kRetryRegularize, ws);
    outcome = PatchOutcome::kRetried;
  }
  if (!ok) {
    MarkPatchFailed(plan_, d, bundle);
    if (model_window != nullptr) model_window->assign(static_cast<std::size_t>(d.ny) * d.nx, 0.0);
    return PatchOutcome::kFailed;
  }
  StepTimer out_timer;
  WriteOutputs(d, ws, bundle, model_window);
  out_timer.Lap(&ws->steps_.outputs);
  return outcome;
}

}  // namespace spexd::core
