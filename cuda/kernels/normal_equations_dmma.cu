// The normal equations M = A^T N A on the FP64 tensor cores (extraction-spec §2.7-2.8).
// The entry-by-entry kernel (normal_equations.cu) reads two doubles from shared
// memory per multiply-add and was bound by those loads (3.2 ms a batch on the H100). Here
// M is built by 8 x 8 tiles: a block takes eight consecutive wavelengths l of one spectrum,
// stages w_l = ivar * A[:, l] on a canvas of the window pixels their stamps cover (one
// plane per column, zero where a stamp does not reach), and each warp multiplies, for one
// tile of eight rows q of the same or a coupled spectrum, A[p, q] (read from the stamps)
// against the canvas over the pixels p of the two tiles' common box: D(q, l) += sum_p
// A[p, q] w_l[p] by mma.sync m8n8k4, four pixels of a canvas row a step. The products
// outside a stamp are exact zeros, so the sums are those of the overlaps (summed in
// another order than the entry kernel: rounding only).

#include <algorithm>

#include "cuda/kernels/dmma_tiles.cuh"
#include "cuda/kernels/launch_check.h"
#include "cuda/kernels/normal_equations.h"
#include "cuda/kernels/normal_equations_columns.cuh"
#include "core/numerics/stamp_tiles.h"

namespace spexd::cuda {
namespace {

using core::IsEmpty;
using core::kNoPixels;
using core::PixelBox;
constexpr int kNeTile = core::kStampTile;  // the m8n8 tiles' side (core/numerics/stamp_tiles.h)
constexpr int kNeWarps = 4;
constexpr int kNeThreads = 32 * kNeWarps;
// The canvas: kNeTile planes of at most kPlaneMax doubles (a chunk of the tile's box;
// 404 = 4 mod 16, so that the planes' fragments are conflict-free), 25.3 KB: seven blocks an
// SM (H100: 2.19 ms a batch against 2.39 at six blocks and 452 doubles).
constexpr int kPlaneMax = 404;
constexpr int kCanvasDoubles = kNeTile * kPlaneMax;
// The products read B without a column test (TileSteps): up to three doubles past a plane's
// row, so past the last plane's end into these, zeroed with the planes.
constexpr int kCanvasTail = 4;
static_assert(kPlaneMax % 16 == 4, "plane stride 4 mod 16 doubles");

// The smallest stride >= len that is 4 mod 16 doubles.
__device__ __forceinline__ int PlaneStride(int len) { return (len + 11) / 16 * 16 + 4; }

// Row tiles a block can visit at most (its spectrum and the coupled ones, each
// ceil(nt / 8) tiles): the launcher falls back to the entry kernel past it.
constexpr int kMaxCandidates = 128;

// One row tile's products over rows [y0, y1) and columns [x0, x0 + 4 NG) ∩ [.., x1) of the
// common box: a = A[p, q] of this lane's row stamp (origin oy, ox, zero outside it and past
// x1, read through the cache), b = the canvas plane's w_l (pl[y * cw + x]), read without a
// column test: past x1 it is the plane's next entries (finite: w_l, zeros or kCanvasTail's)
// against a = 0, an exact zero term, so the sums' bits are those of the test. Even rows (from y0) sum
// in acc0, odd in acc1, two rows' loads issued before their products (a fixed order). The
// stamp and canvas offsets are stepped by rows and the column tests hoisted: the integer
// work around each m8n8k4 bounded this kernel.
template <int NG>
__device__ __forceinline__ void TileSteps(double (&acc0)[2], double (&acc1)[2],
                                          const double* spot, bool valid, int oy, int ox,
                                          const double* pl, int cw, int y0, int y1, int x0,
                                          int x1, int kk, int sny, int snx) {
  bool bin[NG], ain[NG];
#pragma unroll
  for (int g = 0; g < NG; ++g) {
    const int x = x0 + 4 * g + kk;
    bin[g] = x < x1;
    ain[g] = valid && bin[g] && static_cast<unsigned>(x - ox) < static_cast<unsigned>(snx);
  }
  int ry = y0 - oy;  // this lane's stamp row of canvas row y
  // Row y's stamp and canvas entries at this lane's first column, stepped by two rows (the
  // stamp pointer is read only where ain and the row is in the stamp).
  const double* ap = spot + (ry * snx + x0 + kk - ox);
  const double* crow = pl + y0 * cw + x0 + kk;
  int y = y0;
  for (; y + 1 < y1; y += 2, ry += 2, ap += 2 * snx, crow += 2 * cw) {
    const bool in0 = static_cast<unsigned>(ry) < static_cast<unsigned>(sny);
    const bool in1 = static_cast<unsigned>(ry + 1) < static_cast<unsigned>(sny);
    const double* ap1 = ap + snx;
    const double* crow1 = crow + cw;
    double av[2][NG], bv[2][NG];
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      av[0][g] = in0 && ain[g] ? __ldg(ap + 4 * g) : 0.0;
      av[1][g] = in1 && ain[g] ? __ldg(ap1 + 4 * g) : 0.0;
      bv[0][g] = crow[4 * g];
      bv[1][g] = crow1[4 * g];
    }
#pragma unroll
    for (int g = 0; g < NG; ++g) Dmma(acc0, av[0][g], bv[0][g]);
#pragma unroll
    for (int g = 0; g < NG; ++g) Dmma(acc1, av[1][g], bv[1][g]);
  }
  if (y < y1) {  // an odd row count: the last row, into acc0
    const bool in0 = static_cast<unsigned>(ry) < static_cast<unsigned>(sny);
    double av[NG], bv[NG];
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      av[g] = in0 && ain[g] ? __ldg(ap + 4 * g) : 0.0;
      bv[g] = crow[4 * g];
    }
#pragma unroll
    for (int g = 0; g < NG; ++g) Dmma(acc0, av[g], bv[g]);
  }
}

// Block = (run entry, spectrum s, wavelength tile lt): columns l0 .. l0 + lcount - 1 of M.
__global__ void __launch_bounds__(kNeThreads, 7) BuildNormalEquationsDmmaKernel(RunArgs a) {
  __shared__ __align__(16) double canvas[kCanvasDoubles + kCanvasTail];
  __shared__ int s_oy[kNeTile], s_ox[kNeTile], s_sid[kNeTile];
  __shared__ PixelBox s_box[kMaxCandidates];
  __shared__ PixelBox s_cols;  // the columns' stamps' union
  __shared__ int s_size[kMaxCandidates], s_order[kMaxCandidates];
  __shared__ int16_t s_tile[kMaxCandidates];  // candidate c's spectrum offset * 128 + tile
  __shared__ int8_t s_owner[kMaxCandidates];  // the warp that sums tile s_order[i]
  __shared__ int s_nlist;
  const PlanDims& D = a.dims;
  const int nt = D.nwavetot, ntile = core::StampTilesPerSpectrum(nt);
  // The grid is (wavelength tile, spectrum, entry): no divisions to find them.
  const RunEntry e = a.entries[blockIdx.z];
  const DevicePatch d = a.in.patches[e.patch];
  const int s = static_cast<int>(blockIdx.y), lt = static_cast<int>(blockIdx.x);
  if (s >= d.nspectot) return;  // block-uniform
  const int lcount = core::StampTileCount(nt, lt), l0 = s * nt + lt * kNeTile;
  const int sny = D.stamp_ny, snx = D.stamp_nx, npx = sny * snx;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  // Candidate row tiles: c = (g - s) * ntile + qt for spectra s .. BandLast, those from lt
  // in spectrum s (q >= l); their boxes from their stamps, a stamp a thread.
  const int nspec = core::BandLast(s, e.band, d.nspectot) - s + 1, ncand = nspec * ntile;
  if (tid < lcount) {
    const int64_t idx = StampIndex(D, d, s, lt * kNeTile + tid);
    s_oy[tid] = a.in.yc[idx] - d.y0;
    s_ox[tid] = a.in.xc[idx] - d.x0;
    s_sid[tid] = static_cast<int>(idx);
  }
  static_assert(kMaxCandidates <= 128, "s_tile packs the spectrum offset and tile by 128");
  for (int gi = 0; gi < nspec; ++gi) {
    for (int qt = tid; qt < ntile; qt += kNeThreads) {
      s_box[gi * ntile + qt] = kNoPixels;
      s_tile[gi * ntile + qt] = static_cast<int16_t>(gi * 128 + qt);
    }
  }
  if (tid == 0) {
    s_nlist = 0;
    s_cols = kNoPixels;
  }
  __syncthreads();
  if (tid < lcount) {
    atomicMin(&s_cols.y0, s_oy[tid]);
    atomicMax(&s_cols.y1, s_oy[tid] + sny);
    atomicMin(&s_cols.x0, s_ox[tid]);
    atomicMax(&s_cols.x1, s_ox[tid] + snx);
  }
  for (int gi = 0; gi < nspec; ++gi) {
    for (int w = tid + (gi == 0 ? lt * kNeTile : 0); w < nt; w += kNeThreads) {
      const int c = gi * ntile + w / kNeTile;
      const int64_t idx = StampIndex(D, d, s + gi, w);
      const int oy = a.in.yc[idx] - d.y0, ox = a.in.xc[idx] - d.x0;
      atomicMin(&s_box[c].y0, oy);
      atomicMax(&s_box[c].y1, oy + sny);
      atomicMin(&s_box[c].x0, ox);
      atomicMax(&s_box[c].x1, ox + snx);
    }
  }
  __syncthreads();  // the boxes
  // The columns' box: their stamps' union, clipped to the window (w_l = 0 outside it).
  const PixelBox bl = core::Intersect(s_cols, PixelBox{0, d.ny, 0, d.nx});
  // Each tile's common box with the columns' and its size in k-steps (0: none); then the
  // tiles by decreasing size (ties by index), for the warps' shares below.
  for (int c = tid; c < ncand; c += kNeThreads) {
    const PixelBox k = core::Intersect(s_box[c], bl);
    const bool any = !IsEmpty(k);
    s_box[c] = k;
    s_size[c] = any ? (k.y1 - k.y0) * ((k.x1 - k.x0 + 3) / 4) : 0;
    if (any) atomicAdd(&s_nlist, 1);
  }
  __syncthreads();
  for (int c = tid; c < ncand; c += kNeThreads) {
    const int sz = s_size[c];
    if (sz == 0) continue;  // ranks past s_nlist: never read
    int rank = 0;
    for (int o = 0; o < ncand; ++o) rank += s_size[o] > sz || (s_size[o] == sz && o < c);
    s_order[rank] = c;
  }
  // Chunks of the box that fit a plane (one for the r frame's 8 stamps: ~28 x 12 pixels);
  // an empty box still runs one chunk, for the column sums and zeros.
  const int wbox = max(bl.x1 - bl.x0, 0), hbox = max(bl.y1 - bl.y0, 0);
  int cw = max(1, wbox), ch = max(1, hbox), ncx = 1, ncy = 1;  // one chunk: no divisions
  if (wbox * hbox > kPlaneMax) {
    cw = min(wbox, kPlaneMax);
    ch = max(1, min(hbox, kPlaneMax / cw));
    ncx = (wbox + cw - 1) / cw;
    ncy = (hbox + ch - 1) / ch;
  }
  const int plane = PlaneStride(ch * cw);
  const int kk = lane % 4, ti = lane / 4;  // fragment k and tile row/column of this lane
  const StampWalk walk = MakeStampWalk(snx, lane);
  double* mslot = SlotMatrix(a, e.slot);
  for (int cy = 0; cy < ncy; ++cy) {
    for (int cx = 0; cx < ncx; ++cx) {
      const bool first = cy == 0 && cx == 0;
      const PixelBox cb{bl.y0 + cy * ch, min(bl.y1, bl.y0 + (cy + 1) * ch), bl.x0 + cx * cw,
                        min(bl.x1, bl.x0 + (cx + 1) * cw)};
      for (int i = 2 * tid; i < kNeTile * plane + kCanvasTail; i += 2 * kNeThreads) {  // even
        *reinterpret_cast<double2*>(canvas + i) = double2{0.0, 0.0};
      }
      __syncthreads();
      if (first && tid == 0) {
        // The tiles to the warps, largest first, each to the least loaded warp so far (the
        // products' critical path; round-robin left the largest tile's warp twice the mean).
        int load[kNeWarps] = {};
        for (int i = 0; i < s_nlist; ++i) {
          int w = 0;
          for (int v = 1; v < kNeWarps; ++v) w = load[v] < load[w] ? v : w;
          load[w] += s_size[s_order[i]];
          s_owner[i] = static_cast<int8_t>(w);
        }
      }
      for (int j = warp; j < lcount; j += kNeWarps) {
        double* pl = canvas + j * plane;
        double fsum, bsum;
        StampWeights<false>(a, d, s_oy[j], s_ox[j], a.in.spots + static_cast<int64_t>(s_sid[j]) * npx,
                     walk, &fsum, &bsum, [&](int, int r, int c, double va) {
                       if (static_cast<unsigned>(r - cb.y0) < static_cast<unsigned>(cb.y1 - cb.y0) &&
                           static_cast<unsigned>(c - cb.x0) < static_cast<unsigned>(cb.x1 - cb.x0)) {
                         pl[(r - cb.y0) * cw + c - cb.x0] = va;
                       }
                     });
        if (first) {
          StoreColumnSums(a, e, l0 + j, lane, fsum, bsum);
          ZeroColumn(a, e, d, l0 + j, s, lane);
        }
      }
      __syncthreads();  // the canvas, and the zeros the tiles overwrite
      const int nlist = s_nlist;
      for (int li = 0; li < nlist; ++li) {
        if (s_owner[li] != warp) continue;
        const int c = s_order[li], gq = s_tile[c], qt = gq % 128;
        const int g = s + gq / 128, qw0 = qt * kNeTile;
        const int qcount = core::StampTileCount(nt, qt), q0 = g * nt + qw0;
        // The common box in this chunk (warp-uniform).
        const PixelBox kb = core::Intersect(cb, s_box[c]);
        if (IsEmpty(kb)) continue;  // no overlap here: the zeros stand
        // This lane's row stamp ti (tile row ti of A and of D).
        const bool valid = ti < qcount;
        int oy = 0, ox = 0;
        const double* spot = a.in.spots;
        if (valid) {
          const int64_t idx = StampIndex(D, d, g, qw0 + ti);
          oy = a.in.yc[idx] - d.y0;
          ox = a.in.xc[idx] - d.x0;
          spot += idx * npx;
        }
        const double* pl = canvas + ti * plane - cb.x0 - cb.y0 * cw;  // pl[y * cw + x]
        double acc0[2] = {0.0, 0.0}, acc1[2] = {0.0, 0.0};
        for (int x0 = kb.x0; x0 < kb.x1; x0 += 16) {  // 16 columns at a time
          const int ng = min(4, (kb.x1 - x0 + 3) / 4);
          switch (ng) {
            case 1: TileSteps<1>(acc0, acc1, spot, valid, oy, ox, pl, cw, kb.y0, kb.y1, x0, kb.x1, kk, sny, snx); break;
            case 2: TileSteps<2>(acc0, acc1, spot, valid, oy, ox, pl, cw, kb.y0, kb.y1, x0, kb.x1, kk, sny, snx); break;
            case 3: TileSteps<3>(acc0, acc1, spot, valid, oy, ox, pl, cw, kb.y0, kb.y1, x0, kb.x1, kk, sny, snx); break;
            default: TileSteps<4>(acc0, acc1, spot, valid, oy, ox, pl, cw, kb.y0, kb.y1, x0, kb.x1, kk, sny, snx); break;
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = 2 * kk + h, q = q0 + ti, l = l0 + j;
          if (!valid || j >= lcount || q < l) continue;
          double* m = mslot + static_cast<int64_t>(l) * D.ld + q;
          const double v = acc0[h] + acc1[h];
          *m = ncx * ncy == 1 ? v : *m + v;  // later chunks add to the first's sums
        }
      }
      __syncthreads();  // before the next chunk restages the canvas
    }
  }
}

}  // namespace

cudaError_t LaunchBuildNormalEquationsDmma(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const int nt = args.dims.nwavetot;
  const unsigned nspec = CeilDiv(args.dims.ld, nt), ntile = CeilDiv(nt, kNeTile);
  // Candidate row tiles of a block <= spectra a patch can have x tiles a spectrum.
  if (nspec * ntile > kMaxCandidates) return LaunchBuildNormalEquations(args, stream);
  // Entries along the grid's z, at most 65535 a launch.
  constexpr int kMaxZ = 65535;
  for (int first = 0; first < args.count; first += kMaxZ) {
    RunArgs part = args;
    part.entries = args.entries + first;
    part.count = std::min(kMaxZ, args.count - first);
    BuildNormalEquationsDmmaKernel<<<dim3(ntile, nspec, static_cast<unsigned>(part.count)),
                                     kNeThreads, 0, stream>>>(part);
    const cudaError_t err = SPEXD_CHECK_LAUNCH(stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace spexd::cuda
