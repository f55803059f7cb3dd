#include "client/spexctl/remote_frame.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/float_convert.h"

namespace spexd::client {
namespace {

template <typename Field>
void Append(const Field& src, std::vector<double>* dst) {
  dst->insert(dst->end(), src.begin(), src.end());
}

// Little-endian float32 widened to float64 (exact).
void AppendFloat32(const std::string& bytes, std::vector<double>* dst) {
  const std::size_t n = bytes.size() / sizeof(float);
  const std::size_t old = dst->size();
  dst->resize(old + n);
  core::WidenFloat32(bytes.data(), dst->data() + old, n);
}

// A part's bytes appended to `dst`: moved when `dst` is empty (a bundle in one part).
void TakeBytes(std::string* part, std::string* dst) {
  if (dst->empty()) {
    dst->swap(*part);
  } else {
    dst->append(*part);
  }
}

// A part's arrays (`n` bins) appended to a Frame or a BundleResult (same member names):
// the resolution when `resolution`, pixmask_fraction and the failed bins when
// `mask_inputs` (float64 parts only: a float32 stream's mask comes in FrameProducts).
template <typename Arrays>
void AppendPart(const v1::BundleData& p, bool f32, std::size_t n, bool resolution,
                bool mask_inputs, Arrays* dst) {
  if (f32) {
    AppendFloat32(p.flux_f32(), &dst->flux);
    AppendFloat32(p.ivar_f32(), &dst->ivar);
    if (resolution) AppendFloat32(p.resolution_f32(), &dst->rdiags);
    AppendFloat32(p.chi2pix_f32(), &dst->chi2pix);
    return;
  }
  Append(p.flux(), &dst->flux);
  Append(p.ivar(), &dst->ivar);
  if (resolution) Append(p.resolution(), &dst->rdiags);
  Append(p.chi2pix(), &dst->chi2pix);
  if (!mask_inputs) return;
  Append(p.pixmask_fraction(), &dst->pixmask_fraction);
  if (p.failed_bins().empty()) {
    dst->failed_bins.insert(dst->failed_bins.end(), n, 0);
  } else {
    dst->failed_bins.insert(dst->failed_bins.end(), p.failed_bins().begin(),
                            p.failed_bins().end());
  }
}

}  // namespace

absl::Status RemoteFrameBuilder::OnHeader(const v1::FrameHeader& h) {
  if (have_header_) return absl::DataLossError("second FrameHeader in one stream");
  if (h.wave_size() == 0 || h.ndiag() < 0) {
    return absl::DataLossError("FrameHeader without a wavelength grid or with negative ndiag");
  }
  have_header_ = true;
  header_ = h;
  frame_.nwave = h.wave_size();
  frame_.ndiag = h.ndiag();
  frame_.wave.assign(h.wave().begin(), h.wave().end());
  // The arrays are sized once from the announced bundles (a full r frame is ~140 MB):
  // growing them part by part would copy and page-fault them again at each doubling.
  int64_t fibers = 0;
  for (int b : h.bundles()) {
    const int64_t first = int64_t{b} * h.bundlesize();
    fibers += std::clamp<int64_t>(int64_t{h.nspec()} - first, 0, h.bundlesize());
  }
  const int64_t bins = fibers * h.wave_size();
  const int64_t nk = 2 * int64_t{h.ndiag()} + 1;
  constexpr int64_t kMaxReserveBins = int64_t{1} << 28;  // a malformed header reserves nothing
  if (bins > 0 && bins * nk <= kMaxReserveBins) {
    const auto n = static_cast<std::size_t>(bins);
    frame_.flux.reserve(n);
    frame_.ivar.reserve(n);
    if (!sink_) frame_.rdiags.reserve(n * static_cast<std::size_t>(nk));
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
    if (sink_) {
      pending_ = std::make_shared<core::BundleResult>();
      pending_->bundle = p.bundle();
      pending_->fiber_begin = next_fiber_;
      pending_->nwave = frame_.nwave;
      pending_->ndiag = frame_.ndiag;
      pending_->per_angstrom = true;  // the server streams FinalizeBundle's values
      pending_row_ = frame_.nspec;
      pending_float32_.reset();
      if (float32_sink_) {
        pending_float32_ = std::make_shared<core::Float32Rows>();
        pending_float32_->bundle = p.bundle();
      }
    }
  }
  const std::size_t n = static_cast<std::size_t>(p.nfibers()) * frame_.nwave;
  const std::size_t nk = static_cast<std::size_t>(2 * frame_.ndiag + 1);
  const std::size_t f = sizeof(float);
  // A part is float32 when it carries the *_f32 fields (an old server ignores the
  // request and sends float64: both are read); one stream never mixes the two.
  const bool f32 = !p.flux_f32().empty() || !p.resolution_f32().empty();
  const Precision precision = f32 ? Precision::kFloat32 : Precision::kFloat64;
  if (n > 0 && precision_ != Precision::kUnknown && precision != precision_) {
    return absl::DataLossError("float32 and float64 parts in one stream");
  }
  const bool sizes_ok =
      f32 ? (p.flux_f32().size() == n * f && p.ivar_f32().size() == n * f &&
             p.chi2pix_f32().size() == n * f && p.resolution_f32().size() == n * nk * f &&
             p.flux_size() == 0 && p.pixmask_fraction_size() == 0)
          : (p.flux_size() == static_cast<int>(n) && p.ivar_size() == static_cast<int>(n) &&
             p.chi2pix_size() == static_cast<int>(n) &&
             p.pixmask_fraction_size() == static_cast<int>(n) &&
             p.resolution_size() == static_cast<int>(n * nk) &&
             (p.failed_bins().empty() || p.failed_bins().size() == n));
  if (p.fiber_begin() != next_fiber_ || !sizes_ok) {
    return absl::DataLossError(absl::StrCat("malformed part of bundle ", p.bundle()));
  }
  if (n > 0) precision_ = precision;
  if (frame_.nspec == 0) frame_.specmin = p.fiber_begin();
  frame_.nspec += p.nfibers();
  next_fiber_ += p.nfibers();
  if (!f32 || !sink_ || keep_spectra_) {
    AppendPart(p, f32, n, /*resolution=*/!sink_, /*mask_inputs=*/true, &frame_);
  }
  // An empty part carries no *_f32 fields even in a float32 stream: it changes nothing.
  if (sink_ && pending_float32_ != nullptr && (f32 || n == 0)) {
    pending_float32_->nfibers += p.nfibers();
    TakeBytes(p.mutable_flux_f32(), &pending_float32_->flux);
    TakeBytes(p.mutable_ivar_f32(), &pending_float32_->ivar);
    TakeBytes(p.mutable_resolution_f32(), &pending_float32_->rdiags);
    TakeBytes(p.mutable_chi2pix_f32(), &pending_float32_->chi2pix);
  } else if (sink_) {
    pending_float32_.reset();  // a float64 stream: the widened values go to sink_
    pending_->nfibers += p.nfibers();
    AppendPart(p, f32, n, /*resolution=*/true, /*mask_inputs=*/false, pending_.get());
  }
  if (p.last_part()) {
    frame_.counts.extracted += p.counts().extracted();
    frame_.counts.skipped += p.counts().skipped();
    frame_.counts.retried += p.counts().retried();
    frame_.counts.failed += p.counts().failed();
    current_bundle_ = -1;
    ++bundles_done_;
    if (pending_float32_ != nullptr) {
      pending_.reset();
      return float32_sink_(pending_row_, std::move(pending_float32_));
    }
    if (sink_) return sink_(pending_row_, std::move(pending_));
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

absl::Status RemoteFrameBuilder::OnProducts(const v1::FrameProducts& p) {
  if (!have_header_) return absl::DataLossError("FrameProducts before the FrameHeader");
  const int64_t offset = static_cast<int64_t>(products_mask_.size());
  if (current_bundle_ >= 0 || p.nrows() < 0 || p.row_begin() != offset / frame_.nwave ||
      p.mask_size() != static_cast<int64_t>(p.nrows()) * frame_.nwave ||
      offset + p.mask_size() > static_cast<int64_t>(frame_.nspec) * frame_.nwave ||
      (have_scores_part_ && p.scores_size() > 0)) {
    return absl::DataLossError("malformed FrameProducts part");
  }
  products_mask_.insert(products_mask_.end(), p.mask().begin(), p.mask().end());
  if (!have_scores_part_) {
    have_scores_part_ = true;
    for (const v1::ScoreColumn& c : p.scores()) {
      if (c.values_size() != frame_.nspec) return absl::DataLossError("malformed scores");
      scores_.push_back({c.name(), c.comment(), {c.values().begin(), c.values().end()}});
    }
  }
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
  if (float32()) {
    // The mask of the float64 values: rounded chi2pix could cross its thresholds.
    if (products_mask_.size() != static_cast<std::size_t>(frame_.nspec) * frame_.nwave) {
      return absl::DataLossError("float32 stream without the server's mask (FrameProducts)");
    }
    frame_.mask = std::move(products_mask_);
  } else {
    core::ComputeSpecMask(&frame_, policy);
  }
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
  if (float32()) meta.given_scores = scores_;  // those of the float64 values
  return meta;
}

}  // namespace spexd::client
