#include "client/remote_frame.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace spexd::client {
namespace {

template <typename Field>
void Append(const Field& src, std::vector<double>* dst) {
  dst->insert(dst->end(), src.begin(), src.end());
}

}  // namespace

absl::Status RemoteFrameBuilder::OnHeader(const v1::FrameHeader& h) {
  if (have_header_) return absl::DataLossError("second FrameHeader in one stream");
  if (h.nwave() <= 0 || h.wave_size() != h.nwave() || h.ndiag() < 0) {
    return absl::DataLossError("FrameHeader with an inconsistent wavelength grid");
  }
  have_header_ = true;
  header_ = h;
  frame_.nwave = h.nwave();
  frame_.ndiag = h.ndiag();
  frame_.wave.assign(h.wave().begin(), h.wave().end());
  // The arrays are sized once from the announced bundles (a full r frame is ~140 MB):
  // growing them part by part would copy and page-fault them again at each doubling.
  int64_t fibers = 0;
  for (int b : h.bundles()) {
    const int64_t first = int64_t{b} * h.bundlesize();
    fibers += std::clamp<int64_t>(int64_t{h.nspec()} - first, 0, h.bundlesize());
  }
  const int64_t bins = fibers * h.nwave();
  const int64_t nk = 2 * int64_t{h.ndiag()} + 1;
  constexpr int64_t kMaxReserveBins = int64_t{1} << 28;  // a malformed header reserves nothing
  if (bins > 0 && bins * nk <= kMaxReserveBins) {
    const auto n = static_cast<std::size_t>(bins);
    frame_.flux.reserve(n);
    frame_.ivar.reserve(n);
    frame_.rdiags.reserve(n * static_cast<std::size_t>(nk));
    frame_.pixmask_fraction.reserve(n);
    frame_.chi2pix.reserve(n);
    frame_.failed_bins.reserve(n);
  }
  return absl::OkStatus();
}

absl::Status RemoteFrameBuilder::OnBundle(v1::BundleData&& p) {
  if (!have_header_) return absl::DataLossError("BundleData before the FrameHeader");
  if (p.bundle() != current_bundle_) {
    // A new bundle: the previous one must be complete and this one the next expected.
    if (current_bundle_ >= 0) return absl::DataLossError("bundle parts out of order");
    if (bundles_done_ >= header_.bundles_size() || p.bundle() != header_.bundles(bundles_done_)) {
      return absl::DataLossError(absl::StrCat("unexpected bundle ", p.bundle()));
    }
    current_bundle_ = p.bundle();
    next_fiber_ = header_.specmin() + p.bundle() * header_.bundlesize();
  }
  const std::size_t n = static_cast<std::size_t>(p.nfibers()) * frame_.nwave;
  const std::size_t nk = static_cast<std::size_t>(2 * frame_.ndiag + 1);
  if (p.fiber_begin() != next_fiber_ || p.flux_size() != static_cast<int>(n) ||
      p.ivar_size() != static_cast<int>(n) || p.chi2pix_size() != static_cast<int>(n) ||
      p.pixmask_fraction_size() != static_cast<int>(n) ||
      p.resolution_size() != static_cast<int>(n * nk) ||
      (!p.failed_bins().empty() && p.failed_bins().size() != n)) {
    return absl::DataLossError(absl::StrCat("malformed part of bundle ", p.bundle()));
  }
  if (frame_.nspec == 0) frame_.specmin = p.fiber_begin();
  frame_.nspec += p.nfibers();
  next_fiber_ += p.nfibers();
  Append(p.flux(), &frame_.flux);
  Append(p.ivar(), &frame_.ivar);
  Append(p.resolution(), &frame_.rdiags);
  Append(p.pixmask_fraction(), &frame_.pixmask_fraction);
  Append(p.chi2pix(), &frame_.chi2pix);
  if (p.failed_bins().empty()) {
    frame_.failed_bins.insert(frame_.failed_bins.end(), n, 0);
  } else {
    frame_.failed_bins.insert(frame_.failed_bins.end(), p.failed_bins().begin(),
                              p.failed_bins().end());
  }
  if (p.last_part()) {
    frame_.counts.extracted += p.counts().extracted();
    frame_.counts.skipped += p.counts().skipped();
    frame_.counts.retried += p.counts().retried();
    frame_.counts.failed += p.counts().failed();
    current_bundle_ = -1;
    ++bundles_done_;
  }
  return absl::OkStatus();
}

absl::Status RemoteFrameBuilder::OnModel(const v1::ModelChunk& c) {
  if (!have_header_) return absl::DataLossError("ModelChunk before the FrameHeader");
  const int64_t expected = static_cast<int64_t>(header_.image_height()) * header_.image_width() *
                           static_cast<int64_t>(sizeof(double));
  if (c.total_bytes() != expected || c.offset() != model_received_ ||
      c.offset() + static_cast<int64_t>(c.data().size()) > expected ||
      c.data().size() % sizeof(double) != 0) {
    return absl::DataLossError("malformed model chunk");
  }
  if (frame_.model.empty()) {
    frame_.model_height = header_.image_height();
    frame_.model_width = header_.image_width();
    frame_.model.assign(static_cast<std::size_t>(expected) / sizeof(double), 0.0);
  }
  std::memcpy(reinterpret_cast<char*>(frame_.model.data()) + c.offset(), c.data().data(),
              c.data().size());
  model_received_ += static_cast<int64_t>(c.data().size());
  return absl::OkStatus();
}

absl::StatusOr<core::Frame> RemoteFrameBuilder::Finish(core::MaskPolicy policy) {
  if (!have_header_) return absl::DataLossError("no FrameHeader received");
  if (bundles_done_ != header_.bundles_size() || current_bundle_ >= 0) {
    return absl::DataLossError(absl::StrCat("received ", bundles_done_, " of ",
                                            header_.bundles_size(), " bundles"));
  }
  if (!frame_.model.empty() &&
      model_received_ != static_cast<int64_t>(frame_.model.size() * sizeof(double))) {
    return absl::DataLossError("model image incomplete");
  }
  core::ComputeSpecMask(&frame_, policy);
  return std::move(frame_);
}

core::FrameMetadata RemoteFrameBuilder::Metadata(const std::string& in_psf,
                                                 const std::string& in_img) const {
  core::FrameMetadata meta;
  meta.image_header.assign(header_.image_header().begin(), header_.image_header().end());
  meta.fibermap_fits = header_.fibermap_fits();
  meta.in_psf = in_psf;
  meta.in_img = in_img;
  meta.orig_psf = header_.orig_psf();
  meta.wmin = header_.wavemin();
  meta.wmax = header_.wavemax();
  meta.dw = header_.wavestep();
  if (header_.heliocor() != 0.0) meta.heliocor = header_.heliocor();
  return meta;
}

}  // namespace spexd::client
