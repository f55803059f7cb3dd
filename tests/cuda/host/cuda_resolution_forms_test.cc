// A job whose resolution one consumer alone reads (ExtractionJob::resolution_form): the
// CUDA backend narrows RESOLUTION on the device to that consumer's float32 bytes. A frame
// file written from the file's (big-endian) bytes is byte for byte (every DATASUM and
// CHECKSUM with it) the file written from the same job's float64 results, narrowed on the
// host; a float32 stream's (little-endian) bytes are the host's rounding of those results.
// The other arrays are those of the float64 route, bit for bit. With failed patches too
// (their bins zeroed on the host in every form).
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/frame/extraction_result.h"
#include "core/frame/frame.h"
#include "core/frame/progressive_frame_file.h"
#include "tests/cuda/host/cuda_backend_fixture.h"
#include "tests/cuda/host/extract_run.h"
#include "tests/frame_fixtures.h"

namespace spexd::testing {
namespace {

using core::BundleResult;

// The frame file of `bundles` (FinalizeBundle applied here), as the server writes it.
std::string WriteFrameFile(std::vector<BundleResult>* bundles, const core::Geometry& geo) {
  const core::PatchPlan& plan = geo.plan();
  const std::string path = MakeTempDir() + "/frame.fits";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  EXPECT_GE(fd, 0);
  if (fd < 0) return "";
  core::FitsWriteOptions options;
  options.checksum_time = "2026-11-29T12:00:00";
  const core::FrameFileShape shape{plan.specmin, plan.nspec, plan.nwave, plan.ndiag, plan.wave};
  auto file = core::ProgressiveFrameFile::Create(shape, R1FrameMeta(), fd, path, options);
  EXPECT_TRUE(file.ok()) << file.status();
  std::string bytes;
  if (file.ok()) {
    for (BundleResult& b : *bundles) {
      core::FinalizeBundle(geo.dwave(), &b);
      const absl::Status st = (*file)->AddRows(b.fiber_begin - plan.specmin, b);
      EXPECT_TRUE(st.ok()) << st;
    }
    core::Frame frame;  // Finish reads its shape and mask
    frame.nspec = plan.nspec;
    frame.nwave = plan.nwave;
    frame.mask.assign(static_cast<std::size_t>(plan.nspec) * plan.nwave, 0);
    const absl::Status st = (*file)->Finish(frame);
    EXPECT_TRUE(st.ok()) << st;
    bytes = ReadBytes(path);
  }
  ::close(fd);
  return bytes;
}

bool SameDoubles(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

class CudaResolutionFormsTest : public CudaBackendTest {
 protected:
  // Runs `job` through the three routes and compares them; the float64 route's failed
  // patches. The float64 route last: on the suite's fresh backend, the first test's float64
  // job is the first to need the page-locked float64 resolution, which the workspace then
  // adds to what the words jobs reserved (Workspace::Reserve's host_rdiag).
  int64_t ExpectSameFile(core::ExtractionJob job) {
    job.resolution_form = core::ResolutionForm::kFileBytes;
    auto narrowed = RunJob(*gpu_, job);
    job.resolution_form = core::ResolutionForm::kStreamFloat32;
    auto streamed = RunJob(*gpu_, job);
    job.resolution_form = core::ResolutionForm::kFloat64;
    auto doubles = RunJob(*gpu_, job);
    EXPECT_TRUE(doubles.ok()) << doubles.status();
    EXPECT_TRUE(narrowed.ok()) << narrowed.status();
    EXPECT_TRUE(streamed.ok()) << streamed.status();
    if (!doubles.ok() || !narrowed.ok() || !streamed.ok()) return -1;
    EXPECT_EQ(doubles->bundles.size(), narrowed->bundles.size());
    EXPECT_EQ(doubles->bundles.size(), streamed->bundles.size());
    if (doubles->bundles.size() != narrowed->bundles.size() ||
        doubles->bundles.size() != streamed->bundles.size()) {
      return -1;
    }
    const auto same_others = [](const BundleResult& d, const BundleResult& n) {
      return SameDoubles(d.flux, n.flux) && SameDoubles(d.ivar, n.ivar) &&
             SameDoubles(d.chi2pix, n.chi2pix) &&
             SameDoubles(d.pixmask_fraction, n.pixmask_fraction) && d.failed_bins == n.failed_bins;
    };
    for (std::size_t i = 0; i < doubles->bundles.size(); ++i) {
      const BundleResult& d = doubles->bundles[i];
      const BundleResult& n = narrowed->bundles[i];
      const BundleResult& s = streamed->bundles[i];
      SCOPED_TRACE(::testing::Message() << "bundle " << d.bundle);
      EXPECT_TRUE(d.rdiags_file.empty() && d.rdiags_f32.empty());
      EXPECT_TRUE(n.rdiags.empty()) << "the file's resolution came as float64";
      EXPECT_TRUE(s.rdiags.empty()) << "the stream's resolution came as float64";
      EXPECT_TRUE(s.rdiags_file.empty()) << "the stream's resolution came as the file's";
      EXPECT_TRUE(Bytes(n.rdiags_file) == HostNarrowed(d.rdiags, core::ResolutionForm::kFileBytes))
          << "the device's file bytes are not the host's narrowing";
      EXPECT_TRUE(Bytes(s.rdiags_f32) == HostNarrowed(d.rdiags, core::ResolutionForm::kStreamFloat32))
          << "the device's float32 bytes are not the host's rounding";
      EXPECT_TRUE(same_others(d, n));
      EXPECT_TRUE(same_others(d, s));
    }
    const std::string from_doubles = WriteFrameFile(&doubles->bundles, *job.geometry);
    const std::string from_bytes = WriteFrameFile(&narrowed->bundles, *job.geometry);
    EXPECT_FALSE(from_doubles.empty());
    EXPECT_TRUE(from_bytes == from_doubles) << "the frame files differ";
    return doubles->summary.counts.failed;
  }
};

TEST_F(CudaResolutionFormsTest, FileAndStreamBytesAreTheFloat64RoutesNarrowed) {
  auto geo = MakeGeometry(100, 50, 6000.0, 6400.0);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image = Synthetic(*geo, 11);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  EXPECT_EQ(ExpectSameFile(job), 0);
}

TEST_F(CudaResolutionFormsTest, FailedPatchesAreZeroInTheFloat32BytesToo) {
  auto geo = MakeGeometry(0, 25, 6000.0, 6300.0);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image = Synthetic(*geo, 3);
  const core::PatchPlan& plan = geo->plan();
  OverflowPatch(plan, plan.patches[3], &image);  // its solve and retry fail
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  EXPECT_GT(ExpectSameFile(job), 0);
}

}  // namespace
}  // namespace spexd::testing
