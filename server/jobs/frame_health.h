// One extraction's numerical health, as the job serves it: adds up the
// bundles (core::HealthAccumulator), records the health metrics, picks the bundle that
// shadow parity re-extracts when the frame is sampled, and fills the summary's FrameQa.
// Owned by the ExtractJob; used by its worker (Start) and then its streaming task.
#ifndef SPEXD_SERVER_FRAME_HEALTH_H_
#define SPEXD_SERVER_FRAME_HEALTH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/frame/extraction_result.h"
#include "core/frame/frame.h"
#include "core/frame/health_summary.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/plan/extraction_params.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

class HealthMetrics;
class ShadowParity;

class FrameHealthTracker {
 public:
  FrameHealthTracker();  // draws the request id
  uint64_t request_id() const { return request_id_; }

  struct Context {
    HealthMetrics* metrics = nullptr;  // may be null
    ShadowParity* shadow = nullptr;    // may be null (off)
    std::string backend, gpu;          // metric labels of the worker that ran it
    std::string psf_id, client_tag;
    std::shared_ptr<const core::Psf> psf;
    std::optional<core::ExtractionPlan> plan;  // the served request's
    double regularize = 0, psferr = 0;
    bool host_image = true;  // false for a frame read from a CUDA region (no host planes)
  };
  // When the worker starts the job: `bundles` are the plan bundles it extracts (in order).
  // keep_chi2pix: no assembled frame will be passed to CountFrame, so the tracker keeps
  // the frame's chi2pix for the specmask's frame-wide rule (core::HealthAccumulator).
  void Start(Context context, const std::vector<int>& bundles, bool keep_chi2pix);
  // Each served bundle (per Angstrom), in order.
  void OnBundle(const core::BundleResult& bundle);
  // Before the job drops its decoded planes: a sampled frame keeps them for the check.
  void KeepImage(std::optional<core::PreprocImage>* image);
  // The assembled frame, when the job builds one, with its final specmask: the mask counts
  // and the median chi2pix are read from its arrays in place (no copy).
  void CountFrame(const core::Frame& frame);
  // Once the frame is served: metrics, the shadow check's hand-off, and `qa`.
  void Finish(v1::FrameQa* qa);
  const core::FrameHealth& health() const { return health_; }
  const std::string& shadow_state() const { return shadow_state_; }
  // After Start: whether a bundle of this frame is kept for the shadow check.
  bool sampled() const { return shadow_bundle_ >= 0; }

 private:
  const uint64_t request_id_;
  Context context_;
  bool started_ = false;
  std::optional<core::HealthAccumulator> accumulator_;
  std::optional<core::FrameHealth> counted_;  // the whole health, from CountFrame
  core::FrameHealth health_;
  int shadow_bundle_ = -1;  // the sampled plan bundle, -1 when not sampled
  std::optional<core::BundleResult> served_;
  std::shared_ptr<core::PreprocImage> image_;
  std::string shadow_state_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_FRAME_HEALTH_H_
