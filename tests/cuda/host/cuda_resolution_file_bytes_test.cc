// A job whose resolution only its frame file reads (ExtractionJob::resolution_file_bytes):
// the CUDA backend narrows RESOLUTION on the device to the file's bytes, and a frame file
// written from them is byte for byte (every DATASUM and CHECKSUM with it) the file written
// from the same job's float64 results, narrowed on the host; the other arrays are those of
// the float64 route, bit for bit. With failed patches too (their bins zeroed on the host
// in either form).
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/base/float_convert.h"
#include "core/frame/extraction_result.h"
#include "core/frame/frame.h"
#include "core/frame/progressive_frame_file.h"
#include "tests/cuda/host/cuda_backend_fixture.h"
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

class CudaResolutionFileBytesTest : public CudaBackendTest {
 protected:
  // Runs `job` through both routes and compares them; the float64 route's failed patches.
  int64_t ExpectSameFile(core::ExtractionJob job) {
    job.resolution_file_bytes = false;
    auto doubles = RunJob(*gpu_, job);
    job.resolution_file_bytes = true;
    auto narrowed = RunJob(*gpu_, job);
    EXPECT_TRUE(doubles.ok()) << doubles.status();
    EXPECT_TRUE(narrowed.ok()) << narrowed.status();
    if (!doubles.ok() || !narrowed.ok()) return -1;
    EXPECT_EQ(doubles->bundles.size(), narrowed->bundles.size());
    if (doubles->bundles.size() != narrowed->bundles.size()) return -1;
    for (std::size_t i = 0; i < doubles->bundles.size(); ++i) {
      const BundleResult& d = doubles->bundles[i];
      const BundleResult& n = narrowed->bundles[i];
      SCOPED_TRACE(::testing::Message() << "bundle " << d.bundle);
      EXPECT_TRUE(d.rdiags_file.empty());
      EXPECT_TRUE(n.rdiags.empty()) << "the resolution came as float64";
      std::vector<char> want(4 * d.rdiags.size());
      core::NarrowToBigEndianFloat32(d.rdiags.data(), d.rdiags.size(), want.data());
      EXPECT_TRUE(n.rdiags_file == want) << "the device's bytes are not the host's narrowing";
      EXPECT_TRUE(SameDoubles(d.flux, n.flux) && SameDoubles(d.ivar, n.ivar) &&
                  SameDoubles(d.chi2pix, n.chi2pix) &&
                  SameDoubles(d.pixmask_fraction, n.pixmask_fraction) && d.failed_bins == n.failed_bins);
    }
    const std::string from_doubles = WriteFrameFile(&doubles->bundles, *job.geometry);
    const std::string from_bytes = WriteFrameFile(&narrowed->bundles, *job.geometry);
    EXPECT_FALSE(from_doubles.empty());
    EXPECT_TRUE(from_bytes == from_doubles) << "the frame files differ";
    return doubles->summary.counts.failed;
  }
};

TEST_F(CudaResolutionFileBytesTest, FrameFileIsTheFloat64RoutesByteForByte) {
  auto geo = MakeGeometry(100, 50, 6000.0, 6400.0);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image = Synthetic(*geo, 11);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  EXPECT_EQ(ExpectSameFile(job), 0);
}

TEST_F(CudaResolutionFileBytesTest, FailedPatchesAreZeroInTheFileBytesToo) {
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
