// A frame extracted through a backend with every bundle kept, for tests that compare two
// extractions of the same frame bit for bit.
#ifndef SPEXD_TESTS_CUDA_HOST_EXTRACT_RUN_H_
#define SPEXD_TESTS_CUDA_HOST_EXTRACT_RUN_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"

namespace spexd::testing {

struct ExtractRun {
  std::vector<core::BundleResult> bundles;
  core::ExtractionSummary summary;
};

inline absl::StatusOr<ExtractRun> ExtractAll(core::Backend& b,
                                             const std::shared_ptr<const core::Geometry>& g,
                                             const core::PreprocImage& image, bool want_model) {
  core::ExtractionJob job;
  job.geometry = g;
  job.image = &image;
  job.want_model = want_model;
  ExtractRun r;
  auto s = b.Extract(job, [&](core::BundleResult&& x) {
    r.bundles.push_back(std::move(x));
    return absl::OkStatus();
  });
  if (!s.ok()) return s.status();
  r.summary = *s;
  return r;
}

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_CUDA_HOST_EXTRACT_RUN_H_
