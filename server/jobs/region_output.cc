#include "server/jobs/region_output.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace spexd::server {

RegionOutputWriter::RegionOutputWriter(std::shared_ptr<const RegisteredRegion> region, uint64_t offset,
                                       core::OutputLayout layout, int specmin)
    : region_(std::move(region)), offset_(offset), layout_(layout), specmin_(specmin) {}

absl::Status RegionOutputWriter::Write(const std::vector<core::ImportedRegion::HostWrite>& writes) {
  std::vector<core::ImportedRegion::HostWrite> at_offset = writes;
  std::size_t bytes = 0;
  for (auto& w : at_offset) {
    w.offset += offset_;
    bytes += w.bytes;
  }
  SPEXD_RETURN_IF_ERROR(region_->memory->WriteManyFromHost(at_offset));
  bytes_written_ += bytes;
  return absl::OkStatus();
}

absl::Status RegionOutputWriter::WriteBundle(const core::BundleResult& b) {
  const int row0 = b.fiber_begin - specmin_;
  if (b.nwave != layout_.nwave || b.ndiag != layout_.ndiag || row0 < 0 ||
      row0 + b.nfibers > layout_.nspec) {
    return absl::InternalError(absl::StrCat("bundle ", b.bundle, " does not fit the output layout"));
  }
  const uint64_t first = static_cast<uint64_t>(row0) * static_cast<uint64_t>(layout_.nwave);
  const std::size_t bins = static_cast<std::size_t>(b.nfibers) * static_cast<std::size_t>(b.nwave);
  const uint64_t nd = layout_.ndiags();
  if (b.flux.size() < bins || b.ivar.size() < bins || b.chi2pix.size() < bins ||
      b.rdiags.size() < bins * nd) {
    return absl::InternalError(absl::StrCat("bundle ", b.bundle, " has fewer results than its shape"));
  }
  // All four sections, then one wait (ImportedRegion::WriteManyFromHost).
  SPEXD_RETURN_IF_ERROR(Write({
      {layout_.flux + first * sizeof(double), b.flux.data(), bins * sizeof(double)},
      {layout_.ivar + first * sizeof(double), b.ivar.data(), bins * sizeof(double)},
      {layout_.resolution + first * nd * sizeof(double), b.rdiags.data(), bins * nd * sizeof(double)},
      {layout_.chi2pix + first * sizeof(double), b.chi2pix.data(), bins * sizeof(double)},
  }));
  rows_.emplace_back(b.fiber_begin, b.nfibers);
  return absl::OkStatus();
}

absl::Status RegionOutputWriter::WriteMask(const core::Frame& frame) {
  const std::size_t nwave = static_cast<std::size_t>(layout_.nwave);
  std::size_t frame_row = 0;
  std::vector<core::ImportedRegion::HostWrite> writes;
  for (const auto& [fiber_begin, nfibers] : rows_) {
    const std::size_t n = static_cast<std::size_t>(nfibers);
    if ((frame_row + n) * nwave > frame.mask.size()) {
      return absl::InternalError("the assembled frame has fewer rows than the bundles written");
    }
    const uint64_t first = static_cast<uint64_t>(fiber_begin - specmin_) * nwave;
    writes.push_back({layout_.mask + first * sizeof(uint32_t), frame.mask.data() + frame_row * nwave,
                      n * nwave * sizeof(uint32_t)});
    frame_row += n;
  }
  return Write(writes);
}

}  // namespace spexd::server
