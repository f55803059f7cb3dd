// A .fits.gz preproc read with raw planes into a pool the CUDA backend pins (as the server
// reads one): IMAGE and IVAR lie inside the pinned block the file was inflated into, and
// their spectra are bit-identical to the plain file's (whose planes are copied into pinned
// buffers of their own) and to the same .fits.gz read into pageable memory. Label "gpu":
// skips without a device.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/io/internal/gzip.h"
#include "core/io/plane_buffer.h"
#include "core/io/preproc.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/extract_run.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// The backend's pinner, remembering the blocks it pinned.
class RecordingPinner : public core::PlaneMemoryPinner {
 public:
  explicit RecordingPinner(std::shared_ptr<core::PlaneMemoryPinner> inner) : inner_(std::move(inner)) {}
  bool Pin(void* data, std::size_t bytes) override {
    const bool ok = inner_->Pin(data, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) pinned_.emplace_back(static_cast<const char*>(data), bytes);
    return ok;
  }
  void Unpin(void* data) override {
    inner_->Unpin(data);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pinned_.begin(); it != pinned_.end(); ++it) {
      if (it->first == data) {
        pinned_.erase(it);
        break;
      }
    }
  }
  // Whether [p, p + bytes) lies inside one pinned block.
  bool Inside(const void* p, std::size_t bytes) {
    const char* c = static_cast<const char*>(p);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [data, n] : pinned_) {
      if (c >= data && c + bytes <= data + n) return true;
    }
    return false;
  }

 private:
  std::shared_ptr<core::PlaneMemoryPinner> inner_;
  std::mutex mu_;
  std::vector<std::pair<const char*, std::size_t>> pinned_;
};

core::PreprocOptions RawOptions(core::PlaneBufferPool* buffers, core::PlaneBufferPool* load) {
  core::PreprocOptions o;
  o.keep_raw = true;
  o.buffers = buffers;
  o.load_buffers = load;
  return o;
}

void ExpectIdentical(const ExtractRun& a, const ExtractRun& b, const std::string& what) {
  ExpectSameBundles(a.bundles, b.bundles, what);
  EXPECT_EQ(a.summary.pixels_masked, b.summary.pixels_masked) << what;
  EXPECT_EQ(a.summary.pixels_nonfinite, b.summary.pixels_nonfinite) << what;
}

TEST(CudaGzipPlanes, UploadedFromThePinnedBlockTheFileWasInflatedInto) {
  absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
  ASSERT_TRUE(options.ok()) << options.status();
  auto backend = core::CreateBackend(*options);
  if (!backend.ok()) GTEST_SKIP() << "CUDA backend unavailable: " << backend.status();
  ASSERT_NE((*backend)->gpu(), nullptr) << "the CUDA backend has GPU capabilities";
  ASSERT_NE((*backend)->gpu()->PlanePinner(), nullptr) << "the CUDA backend pins planes";
  auto pinner = std::make_shared<RecordingPinner>((*backend)->gpu()->PlanePinner());

  std::shared_ptr<const core::Psf> psf = LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  auto plain = MakeSyntheticPreproc(*psf, SyntheticFrameOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto gz = core::GzipCompress(*plain);
  ASSERT_TRUE(gz.ok()) << gz.status();

  core::PlaneBufferPool pinned_pool(int64_t{1} << 30), pageable_pool(int64_t{1} << 30);
  core::PlaneBufferPool load_pool(int64_t{1} << 30);
  pinned_pool.set_pinner(pinner);
  auto from_gz = core::ReadPreprocFromMemory(gz->data(), gz->size(), "frame.fits.gz",
                                             RawOptions(&pinned_pool, &load_pool));
  auto from_plain = core::ReadPreprocFromMemory(plain->data(), plain->size(), "frame.fits",
                                                RawOptions(&pinned_pool, &load_pool));
  auto from_gz_pageable = core::ReadPreprocFromMemory(gz->data(), gz->size(), "frame.fits.gz",
                                                      RawOptions(&pageable_pool, &load_pool));
  ASSERT_TRUE(from_gz.ok()) << from_gz.status();
  ASSERT_TRUE(from_plain.ok()) << from_plain.status();
  ASSERT_TRUE(from_gz_pageable.ok()) << from_gz_pageable.status();
  ASSERT_TRUE(from_gz->has_raw_planes());
  const std::size_t bytes = from_gz->image_raw.size() * sizeof(uint32_t);
  // Both planes are interior pointers of one pinned block: the upload takes them directly.
  EXPECT_TRUE(pinner->Inside(from_gz->image_raw.data(), bytes));
  EXPECT_TRUE(pinner->Inside(from_gz->ivar_raw.data(), bytes));
  const auto* image = static_cast<const char*>(static_cast<const void*>(from_gz->image_raw.data()));
  const auto* ivar = static_cast<const char*>(static_cast<const void*>(from_gz->ivar_raw.data()));
  EXPECT_GT(ivar - image, static_cast<std::ptrdiff_t>(bytes)) << "IVAR's data follows IMAGE's in the inflated file";
  EXPECT_FALSE(pinner->Inside(from_gz_pageable->image_raw.data(), bytes));

  core::ExtractionParams p;
  p.specmin = 0;
  p.nspec = 50;
  p.wmin = 5760.0;
  p.wmax = 5800.0;
  auto g = core::Geometry::Create(psf, p, from_gz->height, from_gz->width, /*cache_spots=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  auto a = ExtractAll(**backend, *g, *from_gz, /*want_model=*/true);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = ExtractAll(**backend, *g, *from_plain, /*want_model=*/true);
  ASSERT_TRUE(b.ok()) << b.status();
  auto c = ExtractAll(**backend, *g, *from_gz_pageable, /*want_model=*/true);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_FALSE(a->bundles.empty());
  EXPECT_GT(a->summary.counts.extracted, 0);
  EXPECT_GT(a->summary.pixels_masked, 0) << "the synthetic frame's hot pixel is masked";
  ExpectIdentical(a.value(), b.value(), ".fits.gz from its pinned block vs .fits");
  ExpectIdentical(a.value(), c.value(), ".fits.gz pinned vs pageable");
}

}  // namespace
}  // namespace spexd::testing
