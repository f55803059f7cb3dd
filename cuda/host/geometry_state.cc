#include "cuda/host/geometry_state.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/base/field_count.h"
#include "core/plan/patch_plan.h"
#include "core/io/psf.h"
#include "core/base/status_macros.h"
#include "cuda/host/cuda_check.h"
#include "cuda/kernels/spot_kernels.h"
#include "cuda/kernels/tiled_cholesky.h"

namespace spexd::cuda {
namespace {

// The plan is uploaded byte for byte: DevicePatch must mirror core::PatchDesc. Every
// field is listed once below; the field counts make a field added to either struct (and
// not to this list) a compile error, and each listed field must have the same type and
// offset in both.
#define SPEXD_PATCH_FIELDS(X) \
  X(bundle) X(fiber0) X(nspectot) X(core_row) X(out_row) X(wave0) X(out_col) X(nkeep) \
  X(y0) X(ny) X(x0) X(nx) X(n) X(skipped)
#define SPEXD_SAME_FIELD(field)                                                          \
  static_assert(offsetof(DevicePatch, field) == offsetof(core::PatchDesc, field));      \
  static_assert(std::is_same_v<decltype(DevicePatch::field), decltype(core::PatchDesc::field)>);
#define SPEXD_COUNT_FIELD(field) +1
SPEXD_PATCH_FIELDS(SPEXD_SAME_FIELD)
static_assert(core::FieldCount<core::PatchDesc>() == 0 SPEXD_PATCH_FIELDS(SPEXD_COUNT_FIELD),
              "core::PatchDesc gained a field: add it to DevicePatch and SPEXD_PATCH_FIELDS");
static_assert(core::FieldCount<DevicePatch>() == 0 SPEXD_PATCH_FIELDS(SPEXD_COUNT_FIELD),
              "DevicePatch gained a field: add it to core::PatchDesc and SPEXD_PATCH_FIELDS");
static_assert(sizeof(DevicePatch) == sizeof(core::PatchDesc));
#undef SPEXD_COUNT_FIELD
#undef SPEXD_SAME_FIELD
#undef SPEXD_PATCH_FIELDS

// Kernel limits (shared-memory tiles): the 74x74 blocks of the r/b/z defaults fit easily.
constexpr int kMaxNwavetot = kTiledMaxNt;
constexpr int kMaxStampPixels = 1024;
constexpr int kMaxGhDegree = 20;

// Into a buffer at least as large (a recycled one is kept as it is: no cudaFree, which
// would wait for the whole device).
template <typename T>
absl::Status Upload(DeviceBuffer<T>* dst, const std::vector<T>& src, const char* what,
                    cudaStream_t stream) {
  if (src.empty()) return absl::OkStatus();
  absl::Status s = dst->Allocate(src.size(), what);
  if (!s.ok()) return s;
  SPEXD_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst->get(), src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GeometryState>> GeometryState::Create(
    std::shared_ptr<const core::Geometry> geometry, const GpuContext& ctx, SpotInputs* inputs,
    std::unique_ptr<GeometryState> recycled) {
  const core::PatchPlan& plan = geometry->plan();
  const core::Psf& psf = geometry->psf();
  if (plan.nwavetot > kMaxNwavetot) {
    return absl::UnimplementedError(absl::StrCat("CUDA backend supports nwavetot <= ",
                                                 kMaxNwavetot, " (got ", plan.nwavetot, ")"));
  }
  if (plan.stamp_ny * plan.stamp_nx > kMaxStampPixels || psf.ghdegx() > kMaxGhDegree ||
      psf.ghdegy() > kMaxGhDegree) {
    return absl::UnimplementedError(absl::StrCat(
        "CUDA backend supports stamps up to ", kMaxStampPixels, " pixels and GH degree ",
        kMaxGhDegree, " (got ", plan.stamp_ny, "x", plan.stamp_nx, ", ", psf.ghdegx(), "/",
        psf.ghdegy(), ")"));
  }
  if (plan.stamp_ny != 2 * psf.hsizey() + 1 || plan.stamp_nx != 2 * psf.hsizex() + 1) {
    return absl::InternalError("plan stamp size does not match the PSF");
  }
  const int64_t nstamp_elems = static_cast<int64_t>(plan.nspec) * static_cast<int64_t>(plan.fullwave.size());
  if (nstamp_elems >= (int64_t{1} << 31)) {
    return absl::UnimplementedError("too many stamps for 32-bit stamp indices");
  }
  std::unique_ptr<GeometryState> st(new GeometryState());
  if (recycled != nullptr) {
    st->patches_ = std::move(recycled->patches_);
    st->xc_ = std::move(recycled->xc_);
    st->yc_ = std::move(recycled->yc_);
    st->spots_ = std::move(recycled->spots_);
    recycled.reset();
  }
  st->geometry_ = geometry;
  PlanDims& D = st->dims_;
  D.nwavetot = plan.nwavetot;
  D.nwavestep = plan.nwavestep;
  D.wavepad_eff = plan.wavepad_eff;
  D.nper = plan.nper;
  D.ndiag = plan.ndiag;
  D.bundlesize = plan.bundlesize;
  D.nwave = plan.nwave;
  D.nfull = static_cast<int32_t>(plan.fullwave.size());
  D.specmin = plan.specmin;
  D.stamp_ny = plan.stamp_ny;
  D.stamp_nx = plan.stamp_nx;
  D.image_height = plan.image_height;
  D.image_width = plan.image_width;
  D.ld = plan.max_n;
  D.max_npix = plan.max_npix;
  D.compat_cpu = geometry->params().compat == core::Compat::kCpu ? 1 : 0;

  cudaStream_t stream = ctx.compute();
  std::vector<DevicePatch> patches(plan.patches.size());
  if (!patches.empty()) std::memcpy(patches.data(), plan.patches.data(), patches.size() * sizeof(DevicePatch));
  absl::Status s = Upload(&st->patches_, patches, "patch plan", stream);
  if (s.ok()) s = Upload(&st->xc_, plan.xc, "stamp corners", stream);
  if (s.ok()) s = Upload(&st->yc_, plan.yc, "stamp corners", stream);
  SpotInputs temporaries;
  if (s.ok()) s = st->EvaluateSpots(*geometry, ctx, inputs != nullptr ? inputs : &temporaries);
  if (!s.ok()) return s;

  // Model canvases: planned once in core (PatchPlan::bundle_canvas, spec §2.12).
  st->canvas_.resize(plan.nbundles);
  for (int b = 0; b < plan.nbundles; ++b) {
    const core::BundleCanvas& c = plan.bundle_canvas[static_cast<std::size_t>(b)];
    CanvasDesc cd{};
    cd.y0 = c.y0;
    cd.x0 = c.x0;
    cd.ny = c.ny;
    cd.nx = c.nx;
    st->canvas_[b] = cd;
    st->max_canvas_ = std::max(st->max_canvas_, static_cast<int64_t>(cd.ny) * cd.nx);
  }
  return st;
}

absl::Status GeometryState::EvaluateSpots(const core::Geometry& geometry, const GpuContext& ctx,
                                          SpotInputs* inputs) {
  const core::PatchPlan& plan = geometry.plan();
  const core::Psf& psf = geometry.psf();
  cudaStream_t stream = ctx.compute();
  // Coefficient tables: X, Y traces (Clenshaw) then the PSF parameters (Vandermonde).
  std::vector<const core::LegendreTable*> tables = {&psf.xtrace(), &psf.ytrace()};
  for (int k = 0; k < psf.num_params(); ++k) tables.push_back(&psf.param_table(k));
  const int nrows = static_cast<int>(tables.size());
  const int nspec_psf = psf.nspec();
  int maxc = 1;
  for (const auto* t : tables) maxc = std::max(maxc, t->ncoeff);
  std::vector<LegendreRow> rows(nrows);
  std::vector<double> coeff(static_cast<std::size_t>(nrows) * nspec_psf * maxc, 0.0);
  for (int r = 0; r < nrows; ++r) {
    const core::LegendreTable& t = *tables[r];
    if (t.ncoeff < 1 || t.coeff.size() != static_cast<std::size_t>(nspec_psf) * t.ncoeff) {
      return absl::InvalidArgumentError(absl::StrCat("PSF coefficient table ", r,
                                                     " has an unexpected shape"));
    }
    rows[r] = LegendreRow{t.wavemin, t.wavemax, t.ncoeff, r < 2 ? 1 : 0};
    for (int f = 0; f < nspec_psf; ++f) {
      for (int k = 0; k < t.ncoeff; ++k) {
        coeff[(static_cast<std::size_t>(r) * nspec_psf + f) * maxc + k] =
            t.coeff[static_cast<std::size_t>(f) * t.ncoeff + k];
      }
    }
  }
  if (psf.num_params() != 2 + (psf.ghdegx() + 1) * (psf.ghdegy() + 1)) {
    return absl::InvalidArgumentError("PSF parameter count does not match GHDEGX/GHDEGY");
  }
  absl::Status s = Upload(&inputs->rows, rows, "PSF tables", stream);
  if (s.ok()) s = Upload(&inputs->coeff, coeff, "PSF coefficients", stream);
  if (s.ok()) s = Upload(&inputs->fullwave, plan.fullwave, "wavelength grid", stream);
  const std::size_t npx = static_cast<std::size_t>(plan.stamp_ny) * plan.stamp_nx;
  if (s.ok()) {
    s = spots_.Allocate(static_cast<std::size_t>(plan.nspec) * plan.fullwave.size() * npx,
                        "spots of the plan's fibres");
  }
  if (!s.ok()) return s;
  Event start, stop;
  SPEXD_RETURN_IF_ERROR(start.Create(true));
  SPEXD_RETURN_IF_ERROR(stop.Create(true));
  SpotKernelArgs args{};
  args.rows = inputs->rows.get();
  args.coeff = inputs->coeff.get();
  args.nrows = nrows;
  args.nspec_psf = nspec_psf;
  args.maxc = maxc;
  args.fullwave = inputs->fullwave.get();
  args.nfull = static_cast<int>(plan.fullwave.size());
  args.xc = xc_.get();
  args.yc = yc_.get();
  args.specmin = plan.specmin;
  args.nspec = plan.nspec;
  args.hsizex = psf.hsizex();
  args.hsizey = psf.hsizey();
  args.ghdegx = psf.ghdegx();
  args.ghdegy = psf.ghdegy();
  args.spots = spots_.get();
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream));
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchEvaluateSpots(args, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), stream));
  // One synchronisation per Geometry, of this backend's stream only: the host's tables
  // (rows, coeff) are copied from pageable memory and go when this returns.
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  float ms = 0;
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  spot_seconds_ = ms * 1e-3;
  return absl::OkStatus();
}

bool GeometryState::Matches(const std::shared_ptr<const core::Geometry>& geometry) const {
  // A weak_ptr never matches a new Geometry that reuses a freed address.
  std::shared_ptr<const core::Geometry> mine = geometry_.lock();
  return mine != nullptr && mine.get() == geometry.get();
}

std::size_t GeometryState::device_bytes() const {
  return patches_.bytes() + xc_.bytes() + yc_.bytes() + spots_.bytes();
}

}  // namespace spexd::cuda
