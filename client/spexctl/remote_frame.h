// Rebuilds a core::Frame from a streamed extraction (FrameHeader, BundleData parts,
// ModelChunks) so that spexctl writes the frame with the same core code as a local run
// (FrameToFits; or core::ProgressiveFrameFile as the bundles arrive, SendBundlesTo and
// client/spexctl/streamed_frame_file.h), bytes included: the streamed values are the server's
// float64 results, or (ARRAY_FLOAT32) those results rounded once to float32, which widen
// back exactly and round to themselves when written, with the mask and scores the server
// made from the float64 values (FrameProducts).
#ifndef SPEXD_CLIENT_REMOTE_FRAME_H_
#define SPEXD_CLIENT_REMOTE_FRAME_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/frame/frame.h"
#include "core/frame/progressive_frame_file.h"
#include "core/frame/frame_writer.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::client {

class RemoteFrameBuilder {
 public:
  // Each bundle once its last part is in, for a frame file written while the stream
  // arrives: the rows from `row` on, per Angstrom (the wire's values, float32
  // widened), with flux, ivar, chi2pix and the resolution. Set before OnHeader; the
  // frame then keeps no resolution (the sink has it), nor, from a float32 stream (whose
  // mask and scores come in FrameProducts), any array unless `keep_spectra` (flux, ivar
  // and chi2pix: --snr). The sink's error ends OnBundle.
  // With `float32_sink`, a float32 stream's bundles go there instead, as the bytes that
  // came (core::Float32Rows): neither widened nor copied, where the file only byte-swaps
  // them.
  using BundleSink =
      std::function<absl::Status(int row, std::shared_ptr<const core::BundleResult> bundle)>;
  using Float32Sink =
      std::function<absl::Status(int row, std::shared_ptr<const core::Float32Rows> rows)>;
  void SendBundlesTo(BundleSink sink, bool keep_spectra = false, Float32Sink float32_sink = {}) {
    sink_ = std::move(sink);
    keep_spectra_ = keep_spectra;
    float32_sink_ = std::move(float32_sink);
  }

  absl::Status OnHeader(const v1::FrameHeader& header);
  // Parts must arrive in order (bundles ascending, fibres ascending within a bundle).
  absl::Status OnBundle(v1::BundleData&& part);
  absl::Status OnModel(const v1::ModelChunk& chunk);
  // ARRAY_FLOAT32: mask parts in row order after the last bundle, scores on the first.
  absl::Status OnProducts(const v1::FrameProducts& products);

  // Checks completeness, computes the desispec specmask over the received fibres
  // (core::ComputeSpecMask, as FrameAssembler::Finish does locally; a float32 stream
  // takes the server's) and returns the frame.
  absl::StatusOr<core::Frame> Finish(core::MaskPolicy policy = core::MaskPolicy::kDesispec);

  // Header cards for FrameToFits. `in_psf` / `in_img` are the names the client used,
  // as a local run writes the paths it was given.
  core::FrameMetadata Metadata(const std::string& in_psf, const std::string& in_img) const;

  int bundles_done() const { return bundles_done_; }
  int bundles_expected() const { return header_.bundles_size(); }
  const v1::FrameHeader& header() const { return header_; }
  // True when the bundles came as float32 (ExtractHeader.array_precision).
  bool float32() const { return precision_ == Precision::kFloat32; }
  // A float32 stream's scores (FrameProducts), as Metadata gives them to the writer.
  const std::vector<core::FrameScore>& given_scores() const { return scores_; }

 private:
  bool have_header_ = false;
  v1::FrameHeader header_;
  core::Frame frame_;
  int bundles_done_ = 0;
  int current_bundle_ = -1;   // bundle whose parts are arriving
  int next_fiber_ = 0;        // expected fiber_begin of the next part
  BundleSink sink_;
  bool keep_spectra_ = true;
  Float32Sink float32_sink_;
  std::shared_ptr<core::BundleResult> pending_;  // the sink's bundle being received
  std::shared_ptr<core::Float32Rows> pending_float32_;  // the same for float32_sink_
  int pending_row_ = 0;                          // its first row in the frame
  int64_t model_received_ = 0;
  enum class Precision { kUnknown, kFloat64, kFloat32 };
  Precision precision_ = Precision::kUnknown;
  std::vector<uint32_t> products_mask_;  // FrameProducts, in fibre order
  std::vector<core::FrameScore> scores_;
  bool have_scores_part_ = false;
};

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_REMOTE_FRAME_H_
