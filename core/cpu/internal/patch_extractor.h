// Extraction of one patch on the CPU (extraction-spec §2.7–2.11): sparse projection
// matrix, weighted normal equations in band storage, banded Cholesky solve, C's core
// diagonal blocks by selected inversion inside the band, decorrelation and the per-patch
// products, written into the bundle arrays.
#ifndef SPEXD_CORE_PATCH_EXTRACTOR_H_
#define SPEXD_CORE_PATCH_EXTRACTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cpu/internal/lane_eigen.h"
#include "core/cpu/internal/relative_eigen.h"
#include "core/cpu/internal/normal_equations.h"
#include "core/cpu/internal/tile_normal_equations.h"
#include "core/plan/extraction_params.h"
#include "core/frame/extraction_result.h"
#include "core/frame/patch_outcome.h"
#include "core/plan/patch_plan.h"
#include "core/plan/spots.h"

namespace spexd::core {

struct PatchOptions {
  Compat compat = Compat::kGpu;
  double regularize = 0.0;
  double psferr = 0.01;
};

// Reusable buffers for one thread, sized once from the plan (grow-only).
class PatchWorkspace {
 public:
  explicit PatchWorkspace(const PatchPlan& plan);

  // Thread CPU seconds spent per step since construction (for profiles and benchmarks).
  struct StepSeconds {
    double projection = 0;  // sparse A
    double normal_eq = 0;   // M, b, fluxweight, regularisation
    double cholesky = 0;    // pbtrf + pbtrs (banded)
    double inverse = 0;     // diagonal blocks of C from the banded Cholesky factor
    double decorrelate = 0; // 74x74 eigen-decompositions, R, flux, ivar, Rdiags
    double outputs = 0;     // pixmask, chi2pix, model
  };
  const StepSeconds& step_seconds() const { return steps_; }
  // The deconvolved flux x = M^-1 b of the last extracted patch (photons per bin, all
  // n unknowns, spectrum-major): for tests of the noiseless identity.
  const double* xflux() const { return x.data(); }
  // core::CholeskyConditionEstimate of the last successful factorisation.
  double condition() const { return condition_; }

 private:
  friend class PatchExtractor;
  // Sparse A by pixel: entries [pix_start[p], pix_start[p+1]) of (col, value).
  std::vector<int32_t> pix_start, pix_fill, entry_col;
  // The patch's window of the image and ivar, [ny][nx] (GatherWindow).
  std::vector<double> win_image, win_ivar;
  std::vector<double> entry_val;
  internal::NormalEqScratch normal_eq;
  // Each unknown's stamp and its corner in the window (BuildSparseA), for M by tiles.
  std::vector<const double*> stamp_ptr;
  std::vector<int32_t> stamp_oy, stamp_ox;
  int stamp_ny = 0, stamp_nx = 0;
  internal::TileScratch tiles;
  // M in dense lower storage (n x n, zero outside its band), then its factor L.
  std::vector<double> m, w, b, fw, x;     // and length-n vectors
  int kd = 0;                             // bandwidth of the last patch's M
  std::vector<double> cfull;              // n x n column-major: C
  std::vector<double> zblock;             // BandInverseScratchSize(n, nwavetot) (band_inverse.h)
  // A core block's decorrelation (decorrelate_products.h): its weights g, Q x and the
  // products' scratch (4 x nwavetot), and Q's resolution band ((2 ndiag + 1) x nwavestep).
  std::vector<double> decor, decor_band;
  // The core blocks' eigen-decompositions (patch_eigen.cc): nper x nwavetot values and
  // nper x nwavetot^2 vectors (column-major, column j for value j).
  std::vector<double> block_vals, block_vecs;
  std::unique_ptr<internal::LaneEigen> lanes;
  std::unique_ptr<internal::RelativeEigen> relative;  // the ill-conditioned blocks' path
  std::vector<double> cholesky_scratch;  // BandCholeskyFactor's transposed panel
  std::vector<double> lapack_work;
  std::vector<int> lapack_iwork;
  std::vector<double> flux, ivar, rdiag, pixmask, chi2, model_col;  // patch core outputs
  // ExtractGroup's state of up to kGroup patches between its phases: each patch's x and
  // per-bin pixel outputs (pixmask, chi2 sums, chi2 weights); the core blocks C_ss of the
  // patches that reached them (lower triangles, leading dimension nwavetot), their
  // decompositions and which were decomposed.
  std::vector<double> group_x, group_pixel, group_blocks, group_vals, group_vecs;
  std::vector<char> group_ok;
  StepSeconds steps_;
  double condition_ = 0;
};

// The image a patch reads: float64 planes, or float32 ones as preproc files store them
// ([height][width] of the plan; one pair set). A patch's window is gathered from either
// into its workspace as float64 (widening is exact: the same numbers either way).
struct ImagePlanes {
  const double* image = nullptr;
  const double* ivar = nullptr;
  const float* image32 = nullptr;
  const float* ivar32 = nullptr;
};

class PatchExtractor {
 public:
  PatchExtractor(const PatchPlan& plan, const PatchOptions& options)
      : plan_(plan), options_(options) {}

  // Extracts `patch` from `planes` using the spots of its bundle, and writes the kept
  // core columns into `bundle` (rows relative to the bundle). When `model_window` is not
  // null it receives the patch model [ny][nx] (zeros if the patch failed).
  // Thread-safe for distinct workspaces and disjoint patches.
  PatchOutcome Extract(const PatchDesc& patch, const Spots& bundle_spots, const ImagePlanes& planes,
                       PatchWorkspace* ws, BundleResult* bundle,
                       std::vector<double>* model_window) const;

  // Patches extracted together so that their core blocks' eigen-decompositions fill whole
  // groups of SIMD lanes (nper = 5 blocks a patch: eight patches are ten full groups of
  // four lanes or five of eight; alone, a patch is a full group and a group with one or
  // four lanes busy, which costs as much).
  static constexpr int kGroup = 8;
  // Extracts patches[0..count) (count <= kGroup, consecutive in the plan) as Extract does
  // each, writing outcomes[i], conditions[i] (ws->condition() after the patch) and, when
  // models is not null, models[i]. The same bits as Extract: every block goes through the
  // lanes either way (a lane's arithmetic does not depend on the others'). A patch that
  // fails its first attempt is extracted again alone by Extract, retry included.
  void ExtractGroup(const PatchDesc* patches, int count, const Spots& bundle_spots,
                    const ImagePlanes& planes, PatchWorkspace* ws, BundleResult* bundle,
                    PatchOutcome* outcomes, double* conditions,
                    std::vector<double>* models) const;

 private:
  // The patch's window of image and ivar into ws->win_image/win_ivar ([ny][nx]).
  void GatherWindow(const PatchDesc& patch, const ImagePlanes& planes, PatchWorkspace* ws) const;
  // One attempt with the given regularisation; false if not SPD or non-finite output.
  // Runs the stages below in order (spec §2.8–2.11, §2.15). Reads the gathered window.
  bool Solve(const PatchDesc& patch, double regularize, PatchWorkspace* ws) const;
  void BuildNormalEquations(const PatchDesc& patch, PatchWorkspace* ws) const;
  void Regularize(int n, double regularize, PatchWorkspace* ws) const;
  bool CholeskySolve(int n, PatchWorkspace* ws) const;
  // C = M^-1 inside the band for the patch spectra [first, nspec), into ws->cfull (needs
  // the factor from CholeskySolve): their diagonal blocks are complete and exact.
  void BandInverse(const PatchDesc& patch, int first, PatchWorkspace* ws) const;
  // Blocks to decompose: block b's lower triangle at lower + b * lower_stride (leading
  // dimension ld), its values and vectors to vals + b * nwavetot, vecs + b * nwavetot^2.
  struct BlockSet {
    const double* lower;
    std::size_t lower_stride;
    int ld;
    double* vals;
    double* vecs;
  };
  // Eigen-decompositions of `count` blocks: lanes() at a time in SIMD lanes (lane_eigen.h), a
  // lane that fails by dsyevd. Returns whether
  // every block was decomposed; ok (when not null) gets 0 for a block dsyevd failed too.
  bool DecomposeBlocks(int count, const BlockSet& blocks, PatchWorkspace* ws, char* ok) const;
  // DecomposeBlocks of the core spectra's blocks C_ss (spec §2.10 step 2) into
  // ws->block_vals/block_vecs.
  bool DecomposeCoreBlocks(const PatchDesc& patch, PatchWorkspace* ws) const;
  // C_s,s of core spectrum k (core_row + k) in ws.cfull after BandInverse (leading
  // dimension n).
  const double* CoreBlock(const PatchDesc& patch, int k, const PatchWorkspace& ws) const;
  // The lower triangle of the nt-square block at `lower` (leading dimension ld) into dst
  // (leading dimension nt).
  static void CopyLowerTriangle(const double* lower, int ld, int nt, double* dst);
  // A block the lanes decomposed whose condition exceeds kRelativeEigenCondition: again by
  // relative_eigen.h, whose result replaces the lanes' where it succeeds.
  void RefineIfIllConditioned(const double* lower, int ld, double* vals, double* vecs,
                              PatchWorkspace* ws) const;
  // One block by dsyevd: the lower triangle of the nwavetot-square block at `lower`
  // (leading dimension ld) into `vals` and `vecs`.
  bool DecomposeWithLapack(const double* lower, int ld, double* vals, double* vecs,
                           PatchWorkspace* ws) const;
  // Q_s = C_ss^{-1/2} from its decomposition (vals, vecs as DecomposeCoreBlocks writes a
  // slot), then flux, ivar and the resolution band of spectrum s from the patch's x.
  void Decorrelate(const PatchDesc& patch, int s, const double* vals, const double* vecs,
                   const double* x, PatchWorkspace* ws) const;
  // Decorrelate for each core spectrum, slot k of vals/vecs for spectrum core_row + k.
  void DecorrelateCore(const PatchDesc& patch, const double* vals, const double* vecs,
                       const double* x, PatchWorkspace* ws) const;
  bool KeptOutputsFinite(const PatchDesc& patch, const PatchWorkspace& ws) const;
  void BuildSparseA(const PatchDesc& patch, const Spots& spots, PatchWorkspace* ws) const;
  void WriteOutputs(const PatchDesc& patch, PatchWorkspace* ws, BundleResult* bundle,
                    std::vector<double>* model_window) const;
  // The per-pixel products of the solution x (spec §2.11): per unknown, pixmask_fraction
  // and chi2pix's numerator and weight (n each).
  void PixelOutputs(const PatchDesc& patch, const double* x, const PatchWorkspace& ws,
                    double* pixmask, double* num, double* wgt) const;
  // The kept core columns of flux, ivar, Rdiags (from ws) and of the pixel outputs into
  // the bundle (spec §2.12).
  void FillBundle(const PatchDesc& patch, const PatchWorkspace& ws, const double* pixmask,
                  const double* num, const double* wgt, BundleResult* bundle) const;
  // The patch model [ny][nx] of the core bins' flux (ws->flux, ivar) through sparse A.
  void ModelWindow(const PatchDesc& patch, PatchWorkspace* ws,
                   std::vector<double>* model_window) const;
  // Normal equations to C's core blocks (the first attempt's stages before the
  // eigen-decompositions); false when M is not positive definite.
  bool SolveToCoreBlocks(const PatchDesc& patch, double regularize, PatchWorkspace* ws) const;

  const PatchPlan& plan_;
  PatchOptions options_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_PATCH_EXTRACTOR_H_
