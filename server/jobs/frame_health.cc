#include "server/jobs/frame_health.h"

#include <atomic>
#include <utility>

#include "server/platform/health_metrics.h"
#include "server/state/shadow_parity.h"

namespace spexd::server {
namespace {

std::atomic<uint64_t> g_next_request_id{1};

}  // namespace

FrameHealthTracker::FrameHealthTracker() : request_id_(g_next_request_id.fetch_add(1)) {}

void FrameHealthTracker::Start(Context context, const std::vector<int>& bundles, bool keep_chi2pix) {
  context_ = std::move(context);
  started_ = true;
  // The policy decides ALLBADPIX as the served specmask does (kDesispecExact: == 1).
  const core::MaskPolicy policy =
      context_.plan.has_value() ? context_.plan->params().mask_policy : core::MaskPolicy::kDesispec;
  std::size_t bins = 0;
  if (keep_chi2pix && context_.plan.has_value() && context_.plan->params().nspec > 0) {
    bins = static_cast<std::size_t>(context_.plan->params().nspec) * context_.plan->wave().size();
  }
  accumulator_.emplace(keep_chi2pix, policy, bins);
  int pick = 0;
  if (context_.shadow != nullptr && context_.shadow->Sample(static_cast<int>(bundles.size()), &pick)) {
    shadow_bundle_ = bundles[static_cast<std::size_t>(pick)];
  }
}

void FrameHealthTracker::OnBundle(const core::BundleResult& b) {
  if (!started_) return;
  accumulator_->Add(b);
  if (context_.metrics != nullptr) context_.metrics->ObserveBundle(context_.backend, context_.gpu, b);
  if (b.bundle == shadow_bundle_) served_ = b;  // one bundle's copy (~7 MB), sampled frames only
}

void FrameHealthTracker::KeepImage(std::optional<core::PreprocImage>* image) {
  if (shadow_bundle_ < 0 || !served_.has_value() || !context_.host_image || !image->has_value()) return;
  image_ = std::make_shared<core::PreprocImage>(std::move(**image));  // moves the planes, no copy
}

void FrameHealthTracker::CountFrame(const core::Frame& frame) {
  if (started_) counted_ = accumulator_->Finish(&frame);
}

void FrameHealthTracker::Finish(v1::FrameQa* qa) {
  qa->set_request_id(request_id_);
  if (!started_) return;
  health_ = counted_.has_value() ? *counted_ : accumulator_->Finish(nullptr);
  if (context_.metrics != nullptr) context_.metrics->ObserveFrame(context_.backend, context_.gpu, health_);
  if (shadow_bundle_ >= 0) {
    bool queued = false;
    if (image_ != nullptr && served_.has_value()) {
      ShadowCheck check;
      check.request_id = request_id_;
      check.psf_id = context_.psf_id;
      check.client_tag = context_.client_tag;
      check.backend = context_.backend;
      check.gpu = context_.gpu;
      check.psf = context_.psf;
      check.plan = context_.plan;
      check.image = std::move(image_);
      check.regularize = context_.regularize;
      check.psferr = context_.psferr;
      check.served = std::move(*served_);
      served_.reset();
      queued = context_.shadow->Offer(std::move(check));
    } else if (context_.metrics != nullptr) {
      context_.metrics->CountShadowCheck(context_.backend, context_.gpu, "skipped");  // no host planes
    }
    shadow_state_ = queued ? "queued" : "skipped";
    qa->set_shadow_parity(shadow_state_);
    qa->set_shadow_bundle(shadow_bundle_);
  }
  qa->set_worst_condition(health_.worst_condition);
  qa->set_worst_condition_bundle(health_.worst_condition_bundle);
  qa->set_retried_patches(health_.counts.retried);
  qa->set_failed_patches(health_.counts.failed);
  qa->set_bins(health_.bins);
  qa->set_somebadpix_bins(health_.somebadpix);
  qa->set_allbadpix_bins(health_.allbadpix);
  qa->set_bad2dfit_bins(health_.bad2dfit);
  qa->set_median_chi2pix(health_.median_chi2pix);
}

}  // namespace spexd::server
