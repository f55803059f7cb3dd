// A .fits.gz read with raw planes (PreprocOptions::keep_raw): IMAGE and IVAR are parts of
// the block the file was inflated into, drawn from the planes' pool, not copies of it; the
// block goes back to that pool only once the frame's planes are gone. The inflation's work
// buffers come from the load's pool and are reused. Also PlaneBuffer::Part.
#include <fcntl.h>
#include <fitsio.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "core/io/plane_buffer.h"
#include "core/io/preproc.h"
#include "gtest/gtest.h"
#include "tests/frame_fixtures.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

constexpr long kFrameWidth = 300, kFrameHeight = 200;
constexpr std::size_t kFramePixels = static_cast<std::size_t>(kFrameWidth) * kFrameHeight;
constexpr std::size_t kRecord = 2880;
// Each HDU here: one header record, then its data padded to whole records.
constexpr std::size_t kPlaneHdu = kRecord + (kFramePixels * 4 + kRecord - 1) / kRecord * kRecord;

// IMAGE (primary), IVAR, READNOISE (an HDU the reader drops while inflating), MASK
// (RICE_1), FIBERMAP.
void WriteFrame(const std::string& path) {
  std::vector<float> image(kFramePixels), ivar(kFramePixels), noise(kFramePixels, 3.0f);
  std::vector<int16_t> mask(kFramePixels, 0);
  for (std::size_t i = 0; i < kFramePixels; ++i) {
    image[i] = static_cast<float>(i % 977) - 400.5f;
    ivar[i] = 1.0f / static_cast<float>(1 + i % 113);
    if (i % 101 == 0) mask[i] = 4;
  }
  auto f = FitsFile::Create(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<long> naxes = {kFrameWidth, kFrameHeight};
  ASSERT_TRUE(f->WriteImage<float>("IMAGE", naxes, image.data()).ok());
  ASSERT_TRUE(f->WriteImage<float>("IVAR", naxes, ivar.data()).ok());
  ASSERT_TRUE(f->WriteImage<float>("READNOISE", naxes, noise.data()).ok());
  int status = 0;
  fits_set_compression_type(f->get(), RICE_1, &status);
  ASSERT_TRUE(f->WriteImage<int16_t>("MASK", naxes, mask.data()).ok());
  fits_set_compression_type(f->get(), NOCOMPRESS, &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(testing::AppendFiberTable(*f, 3), 0);
  ASSERT_TRUE(f->Close().ok());
}

class GzipRawPlanesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    plain_ = dir_ + "/frame.fits";
    WriteFrame(plain_);
    bytes_ = testing::ReadBytes(plain_);
    auto gz = GzipCompress(bytes_);
    ASSERT_TRUE(gz.ok()) << gz.status();
    gz_ = *gz;
    ASSERT_TRUE(testing::WriteBytes(plain_ + ".gz", gz_));
  }
  PreprocOptions RawOptions() {
    PreprocOptions o;
    o.keep_raw = true;
    o.buffers = &buffers_;
    o.load_buffers = &load_buffers_;
    return o;
  }
  std::string dir_, plain_, bytes_, gz_;
  PlaneBufferPool buffers_{int64_t{1} << 28};
  PlaneBufferPool load_buffers_{int64_t{1} << 28};
};

TEST_F(GzipRawPlanesTest, PlanesArePartsOfTheInflatedFileInThePlanesPool) {
  for (bool from_path : {true, false}) {
    SCOPED_TRACE(from_path ? "from a path" : "from memory");
    {
      auto frame = from_path ? ReadPreproc(plain_ + ".gz", RawOptions())
                             : ReadPreprocFromMemory(gz_.data(), gz_.size(), "frame.fits.gz",
                                                     RawOptions());
      ASSERT_TRUE(frame.ok()) << frame.status();
      ASSERT_TRUE(frame->has_raw_planes());
      ASSERT_EQ(frame->image_raw.size(), kFramePixels);
      ASSERT_EQ(frame->mask_raw.size(), kFramePixels);
      // The file's own words, where the file has them: IVAR's data one HDU after IMAGE's,
      // in the same block.
      const char* image = reinterpret_cast<const char*>(frame->image_raw.data());
      const char* ivar = reinterpret_cast<const char*>(frame->ivar_raw.data());
      EXPECT_EQ(ivar - image, static_cast<std::ptrdiff_t>(kPlaneHdu));
      EXPECT_EQ(std::memcmp(image, bytes_.data() + kRecord, kFramePixels * 4), 0);
      EXPECT_EQ(std::memcmp(ivar, bytes_.data() + kRecord + kPlaneHdu, kFramePixels * 4), 0);
      EXPECT_EQ(frame->mask_raw[0], 4);
      EXPECT_EQ(frame->mask_raw[1], 0);
      // The reader is gone; the frame alone holds the block, and its MASK bits.
      EXPECT_EQ(buffers_.cached_bytes(), 0);
    }
    // The planes gone, the block the file was inflated into is back in the planes' pool.
    EXPECT_GE(buffers_.cached_bytes(), static_cast<int64_t>(bytes_.size()));
  }
}

TEST_F(GzipRawPlanesTest, PlanesOfTheGzipFileEqualThoseOfThePlainOne) {
  auto plain = ReadPreproc(plain_, RawOptions());
  auto gz = ReadPreproc(plain_ + ".gz", RawOptions());
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gz.ok()) << gz.status();
  ASSERT_EQ(gz->image_raw.size(), plain->image_raw.size());
  EXPECT_EQ(std::memcmp(gz->image_raw.data(), plain->image_raw.data(), kFramePixels * 4), 0);
  EXPECT_EQ(std::memcmp(gz->ivar_raw.data(), plain->ivar_raw.data(), kFramePixels * 4), 0);
  EXPECT_EQ(std::memcmp(gz->mask_raw.data(), plain->mask_raw.data(), kFramePixels * 2), 0);
  EXPECT_EQ(gz->fibermap_fits, plain->fibermap_fits);
  EXPECT_EQ(gz->image_header, plain->image_header);
  // Decoded in place (a consumer that needs host values): the same values either way.
  DecodeRawPlanes(&*plain);
  DecodeRawPlanes(&*gz);
  EXPECT_EQ(std::memcmp(gz->image32.data(), plain->image32.data(), kFramePixels * 4), 0);
  EXPECT_EQ(std::memcmp(gz->ivar32.data(), plain->ivar32.data(), kFramePixels * 4), 0);
  EXPECT_EQ(gz->n_masked, plain->n_masked);
  EXPECT_EQ(gz->n_nonfinite, plain->n_nonfinite);
}

// The read pieces and the output before the primary header has passed come from the work
// pool, and a second inflation takes them from it again. (The dropped HDU here inflates
// within a step, into the file's block, and is cut out of it there.)
TEST_F(GzipRawPlanesTest, InflationWorkBuffersAreReusedFromTheWorkPool) {
  PlaneBufferPool file_pool{int64_t{1} << 28}, work_pool{int64_t{1} << 28};
  const InflateBuffers pools(&file_pool, &work_pool);
  auto inflate = [&] {
    const int fd = open((plain_ + ".gz").c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    auto fits = InflateFitsFd(fd, plain_, {}, {}, pools, [](const HduHeaderFacts& hdu) {
      return hdu.Named("READNOISE") ? HduUse::kDrop : HduUse::kKeep;
    });
    close(fd);
    return fits;
  };
  {
    auto fits = inflate();
    ASSERT_TRUE(fits.ok()) << fits.status();
    EXPECT_EQ(fits->view().size(), bytes_.size() - kPlaneHdu) << "READNOISE dropped";
    EXPECT_FALSE(fits->block.empty());
    EXPECT_EQ(file_pool.cached_bytes(), 0);
    // The read piece (4 MiB) and the block (2 MiB, the pool's least) that held the output
    // before the primary header passed.
    EXPECT_EQ(work_pool.cached_bytes(), int64_t{6} << 20);
    EXPECT_EQ(work_pool.reused(), 0);
  }
  const int64_t reused = work_pool.reused();
  auto again = inflate();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(work_pool.reused(), reused + 2) << "no work buffer allocated afresh";
  EXPECT_EQ(work_pool.cached_bytes(), int64_t{6} << 20);
  EXPECT_EQ(file_pool.reused(), 1);
}

TEST(PlaneBufferPartTest, TheBlockGoesBackOnceTheOwnerAndEveryPartAreGone) {
  PlaneBufferPool pool{int64_t{8} << 20};
  auto whole = std::make_shared<PlaneBuffer<char>>(PlaneBuffer<char>::Make(4096, &pool));
  auto* words = reinterpret_cast<uint32_t*>(whole->data());
  words[0] = 7;
  words[512] = 9;
  auto first = PlaneBuffer<uint32_t>::Part(whole, words, 512);
  auto second = PlaneBuffer<uint32_t>::Part(whole, words + 512, 512);
  EXPECT_EQ(second[0], 9u);
  EXPECT_EQ(second.capacity_bytes(), 512u * 4);
  whole.reset();
  EXPECT_EQ(pool.cached_bytes(), 0);
  first.Release();
  EXPECT_EQ(pool.cached_bytes(), 0) << "the second part still holds the block";
  PlaneBuffer<uint32_t> copy = second;  // memory of its own
  EXPECT_NE(copy.data(), second.data());
  EXPECT_EQ(copy[0], 9u);
  PlaneBuffer<float> as_float = std::move(second).Reinterpret<float>();
  EXPECT_EQ(pool.cached_bytes(), 0) << "a part reinterpreted is still a part";
  PlaneBuffer<float> moved = std::move(as_float);
  EXPECT_EQ(pool.cached_bytes(), 0);
  moved.Release();
  EXPECT_EQ(pool.cached_bytes(), int64_t{2} << 20);
  EXPECT_EQ(PlaneBuffer<uint32_t>::Part(nullptr, nullptr, 0).size(), 0u);
}

}  // namespace
}  // namespace spexd::core
