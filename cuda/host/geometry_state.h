// Warm device state of one core::Geometry (one PSF, wavelength grid and patch plan):
// the plan uploaded as is, its stamp corners, and every spot of the plan's fibres
// evaluated on the GPU once (extraction-spec §1.4) and kept. Created when a Geometry is
// first used; immutable afterwards.
#ifndef SPEXD_CUDA_GEOMETRY_STATE_H_
#define SPEXD_CUDA_GEOMETRY_STATE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/geometry.h"
#include "cuda/kernels/device_types.h"
#include "cuda/host/gpu_context.h"
#include "cuda/host/memory.h"
#include "cuda/kernels/spot_math.h"

namespace spexd::cuda {

// The spot kernel's inputs (PSF tables, coefficients, wavelength grid): needed only while
// a state is created, and kept by the backend from one creation to the next (grow-only)
// so that no cudaFree follows each new geometry.
struct SpotInputs {
  DeviceBuffer<LegendreRow> rows;
  DeviceBuffer<double> coeff, fullwave;
  std::size_t bytes() const { return rows.bytes() + coeff.bytes() + fullwave.bytes(); }
};

class GeometryState {
 public:
  // Uploads the plan and evaluates the spots on ctx.compute(); synchronises that stream
  // once at the end. UNIMPLEMENTED for shapes the kernels do not support,
  // RESOURCE_EXHAUSTED when the spots do not fit.
  //
  // `recycled` (an evicted state, whose work on ctx's streams has finished) gives its
  // device buffers to the new state where they are large enough. A new PSF per frame (an
  // exposure: 30 cameras, 30 PSFs) then allocates and frees nothing: cudaFree waits for
  // the whole device, so each new geometry stalled the other backend sharing the GPU and
  // its frames ran ~15 % slower than with one PSF.
  // `inputs` (null: temporaries of this call) holds the spot kernel's inputs.
  static absl::StatusOr<std::unique_ptr<GeometryState>> Create(
      std::shared_ptr<const core::Geometry> geometry, const GpuContext& ctx,
      SpotInputs* inputs = nullptr, std::unique_ptr<GeometryState> recycled = nullptr);

  // True while `geometry` is the very object this state was built from (the state holds
  // only a weak reference: the caller's Geometry owns the host plan).
  bool Matches(const std::shared_ptr<const core::Geometry>& geometry) const;
  // The geometry this state was built from (expired once nobody holds it).
  const std::weak_ptr<const core::Geometry>& geometry() const { return geometry_; }

  const PlanDims& dims() const { return dims_; }
  const DevicePatch* patches() const { return patches_.get(); }
  const int32_t* xc() const { return xc_.get(); }
  const int32_t* yc() const { return yc_.get(); }
  const double* spots() const { return spots_.get(); }
  double spot_seconds() const { return spot_seconds_; }
  // Device bytes held: the plan, the stamp corners and the spots (a recycled buffer may be
  // larger than this geometry needs).
  std::size_t device_bytes() const;

  // Model canvas of bundle b (PatchPlan::bundle_canvas; list range unset).
  const CanvasDesc& canvas(int b) const { return canvas_[b]; }
  int64_t max_canvas_pixels() const { return max_canvas_; }

 private:
  GeometryState() = default;
  absl::Status EvaluateSpots(const core::Geometry& geometry, const GpuContext& ctx,
                             SpotInputs* inputs);

  std::weak_ptr<const core::Geometry> geometry_;
  PlanDims dims_{};
  DeviceBuffer<DevicePatch> patches_;
  DeviceBuffer<int32_t> xc_, yc_;
  DeviceBuffer<double> spots_;
  std::vector<CanvasDesc> canvas_;
  int64_t max_canvas_ = 0;
  double spot_seconds_ = 0;
};

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_GEOMETRY_STATE_H_
