// Writes an extraction's results into the client's output region, in the
// layout of core/frame/output_layout.h: each bundle's rows as it is streamed, the specmask
// (which needs the whole frame, spec §2.13) at the end. The results reach the host for
// the per-Angstrom conversion and the mask anyway (core::FinalizeBundle, ComputeSpecMask);
// one host-to-device copy per section then puts them in place (one wait per bundle), and
// nothing crosses the socket.
#ifndef SPEXD_SERVER_REGION_OUTPUT_H_
#define SPEXD_SERVER_REGION_OUTPUT_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/frame/extraction_result.h"
#include "core/frame/frame.h"
#include "core/frame/output_layout.h"
#include "server/state/region_registry.h"

namespace spexd::server {

class RegionOutputWriter {
 public:
  // `offset`: where the layout starts in the region (checked by CheckCudaOutput);
  // `specmin`: the plan's first fibre (row 0).
  RegionOutputWriter(std::shared_ptr<const RegisteredRegion> region, uint64_t offset,
                     core::OutputLayout layout, int specmin);

  // Flux, ivar, resolution and chi2pix rows of a finalised bundle (FinalizeBundle
  // applied); complete on the device when this returns.
  absl::Status WriteBundle(const core::BundleResult& bundle);
  // The specmask rows of every bundle written so far, from the frame assembled from
  // exactly those bundles, in the same order (core::FrameAssembler).
  absl::Status WriteMask(const core::Frame& frame);
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  // Copies at layout offsets (from offset_ in the region), complete when this returns.
  absl::Status Write(const std::vector<core::ImportedRegion::HostWrite>& writes);

  std::shared_ptr<const RegisteredRegion> region_;
  uint64_t offset_;
  core::OutputLayout layout_;
  int specmin_;
  std::vector<std::pair<int, int>> rows_;  // (fiber_begin, nfibers) per bundle written
  uint64_t bytes_written_ = 0;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_REGION_OUTPUT_H_
