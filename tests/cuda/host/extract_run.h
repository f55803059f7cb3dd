// A frame extracted through a backend with every bundle kept, for tests that compare two
// extractions of the same frame bit for bit.
#ifndef SPEXD_TESTS_CUDA_HOST_EXTRACT_RUN_H_
#define SPEXD_TESTS_CUDA_HOST_EXTRACT_RUN_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"
#include "core/base/float_convert.h"
#include "gtest/gtest.h"

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

// Every bundle's arrays bit for bit (the device received the same values either way).
inline void ExpectSameBundles(const std::vector<core::BundleResult>& a,
                              const std::vector<core::BundleResult>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].flux, b[i].flux) << what << " bundle " << i;
    EXPECT_EQ(a[i].ivar, b[i].ivar) << what << " bundle " << i;
    EXPECT_EQ(a[i].rdiags, b[i].rdiags) << what << " bundle " << i;
    EXPECT_EQ(a[i].chi2pix, b[i].chi2pix) << what << " bundle " << i;
    EXPECT_EQ(a[i].pixmask_fraction, b[i].pixmask_fraction) << what << " bundle " << i;
    EXPECT_EQ(a[i].model, b[i].model) << what << " bundle " << i;
  }
}

// What the host's narrowing makes of `rdiags` in the bytes of `form` (kFileBytes:
// NarrowToBigEndianFloat32; kStreamFloat32: NarrowToFloat32), which the device's must equal.
inline std::vector<char> HostNarrowed(const std::vector<double>& rdiags, core::ResolutionForm form) {
  std::vector<char> out(4 * rdiags.size());
  if (form == core::ResolutionForm::kFileBytes) {
    core::NarrowToBigEndianFloat32(rdiags.data(), rdiags.size(), out.data());
  } else {
    core::NarrowToFloat32(rdiags.data(), reinterpret_cast<float*>(out.data()), rdiags.size());
  }
  return out;
}

// A bundle's float32 resolution bytes (BundleResult::rdiags_file, rdiags_f32) as a vector.
inline std::vector<char> Bytes(const core::PlaneBuffer<char>& b) { return {b.begin(), b.end()}; }

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_CUDA_HOST_EXTRACT_RUN_H_
