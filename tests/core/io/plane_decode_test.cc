// The parallel plane decoder (core/io/internal/plane_decode.h, PreprocReader::Read) against CFITSIO:
// the planes must be bit-identical to what fits_read_pix gives followed by the pixel rules,
// with or without a pool, float64 or float32 planes kept, plain or gzip, and for the
// planes it leaves to CFITSIO (float64 on disk, scaled); raw planes (keep_raw) hold the
// file's bytes and decode to the same planes. Also PlaneBufferPool.
#include <fitsio.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/frame/usable_data.h"
#include "core/io/fits_file.h"
#include "core/io/internal/gzip.h"
#include "core/numerics/pixel_rules.h"
#include "core/io/plane_buffer.h"
#include "core/io/preproc.h"
#include "core/base/task_pool.h"
#include "gtest/gtest.h"
#include "tests/frame_fixtures.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

// Over two decode chunks per plane, the last one partial.
constexpr long kWidth = 701, kHeight = 800;
constexpr std::size_t kPixels = static_cast<std::size_t>(kWidth) * kHeight;

struct Planes {
  std::vector<float> image, ivar;
  std::vector<int16_t> mask;
};

// Values that exercise the conversion and the rules: NaN, +-Inf, -0, subnormals, the
// float extremes, negative ivar, masked pixels (bad and kept bits).
Planes TestPlanes() {
  Planes p;
  p.image.resize(kPixels);
  p.ivar.resize(kPixels);
  p.mask.assign(kPixels, 0);
  for (std::size_t i = 0; i < kPixels; ++i) {
    p.image[i] = static_cast<float>(std::sin(static_cast<double>(i)) * 1e3) + 1e-3f * static_cast<float>(i % 7);
    p.ivar[i] = 1.0f / (1.0f + static_cast<float>(i % 1000));
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {nan, inf, -inf, -0.0f, std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::min()};
  for (std::size_t k = 0; k < std::size(special); ++k) {
    p.image[1000 + 97 * k] = special[k];
    p.ivar[300000 + 89 * k] = special[k];
  }
  p.ivar[262143] = -2.0f;  // negative ivar at a chunk edge
  p.ivar[262144] = -1.0f;
  for (std::size_t i = 5; i < kPixels; i += 4099) p.mask[i] = static_cast<int16_t>(1 << (i % 10));
  return p;
}

// Writes IMAGE (primary), IVAR, MASK (tile-compressed unless told), FIBERMAP.
void WriteFrame(const std::string& path, const Planes& p, int bitpix = FLOAT_IMG,
                double ivar_bscale = 1.0, bool compress_mask = true, bool with_mask = true) {
  auto f = FitsFile::Create(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<long> naxes = {kWidth, kHeight};
  if (bitpix == DOUBLE_IMG) {
    std::vector<double> im(p.image.begin(), p.image.end()), iv(p.ivar.begin(), p.ivar.end());
    ASSERT_TRUE(f->WriteImage<double>("IMAGE", naxes, im.data()).ok());
    ASSERT_TRUE(f->WriteImage<double>("IVAR", naxes, iv.data()).ok());
  } else {
    ASSERT_TRUE(f->WriteImage<float>("IMAGE", naxes, p.image.data()).ok());
    ASSERT_TRUE(f->WriteImage<float>("IVAR", naxes, p.ivar.data()).ok());
    if (ivar_bscale != 1.0) {
      // Stored values stay; CFITSIO multiplies them on reading.
      int status = 0;
      fits_write_key(f->get(), TDOUBLE, "BSCALE", &ivar_bscale, nullptr, &status);
      fits_set_bscale(f->get(), 1.0, 0.0, &status);
      ASSERT_EQ(status, 0);
    }
  }
  int status = 0;
  if (compress_mask) fits_set_compression_type(f->get(), RICE_1, &status);
  if (with_mask) {
    ASSERT_TRUE(f->WriteImage<int16_t>("MASK", naxes, p.mask.data()).ok());
  }
  fits_set_compression_type(f->get(), NOCOMPRESS, &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(testing::AppendFiberTable(*f, 3), 0);
  ASSERT_TRUE(f->Close().ok());
}

// The reference: CFITSIO's conversion of each whole plane, then the pixel rule per pixel,
// as the reader did before planes were decoded in parallel.
struct Reference {
  std::vector<double> image, ivar;
  std::size_t n_masked = 0, n_nonfinite = 0;
};

Reference ReadReference(const std::string& path) {
  Reference r;
  auto f = FitsFile::OpenRead(path);
  EXPECT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->MoveToHdu("IMAGE").ok());
  r.image = *f->ReadImage<double>();
  EXPECT_TRUE(f->MoveToHdu("IVAR").ok());
  r.ivar = *f->ReadImage<double>();
  std::vector<int16_t> mask(r.image.size(), 0);  // no MASK HDU: nothing masked
  if (f->MoveToHdu("MASK").ok()) mask = *f->ReadImage<int16_t>();
  const uint16_t bad = MaskBadBits(MaskPolicy::kDesispec);
  for (std::size_t i = 0; i < r.image.size(); ++i) {
    const unsigned what = ApplyPixelRule(bad, static_cast<uint16_t>(mask[i]), &r.image[i], &r.ivar[i]);
    r.n_nonfinite += (what & kPixelNonfinite) != 0;
    r.n_masked += (what & kPixelMasked) != 0;
  }
  return r;
}

void ExpectBitIdentical(const std::vector<double>& want, const std::vector<double>& got,
                        const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(double)) != 0 && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << what << ": first at pixel " << first << ": " << want[first] << " vs "
                        << got[first];
}

void ExpectMatches(const Reference& ref, PreprocImage frame, const char* what) {
  EXPECT_EQ(frame.n_masked, ref.n_masked) << what;
  EXPECT_EQ(frame.n_nonfinite, ref.n_nonfinite) << what;
  WidenPlanes(&frame);
  EXPECT_FALSE(frame.has_float32_planes());
  ExpectBitIdentical(ref.image, frame.image, what);
  ExpectBitIdentical(ref.ivar, frame.ivar, what);
}

class PlaneDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    pool_.AddThreads(3);
  }
  // Options with `pool` (null: the caller alone) and the fixture's plane buffers.
  PreprocOptions Options(TaskPool* pool, bool keep_float32) {
    PreprocOptions o;
    o.pool = pool;
    o.keep_float32 = keep_float32;
    o.buffers = &buffers_;
    return o;
  }
  std::string dir_;
  TaskPool pool_;
  PlaneBufferPool buffers_{int64_t{1} << 28};
  PlaneBufferPool load_buffers_{int64_t{1} << 28};
};

TEST_F(PlaneDecodeTest, Float32FileBitIdenticalToCfitsio) {
  const std::string path = dir_ + "/f32.fits";
  WriteFrame(path, TestPlanes());
  const Reference ref = ReadReference(path);
  ASSERT_GT(ref.n_masked, 100u);
  ASSERT_EQ(ref.n_nonfinite, 6u);  // NaN, +Inf, -Inf in each plane
  for (TaskPool* pool : {static_cast<TaskPool*>(nullptr), &pool_}) {
    for (bool keep32 : {false, true}) {
      PreprocOptions o;
      o.pool = pool;
      o.keep_float32 = keep32;
      o.buffers = keep32 && pool != nullptr ? &buffers_ : nullptr;
      o.load_buffers = pool != nullptr ? &load_buffers_ : nullptr;
      auto frame = ReadPreproc(path, o);
      ASSERT_TRUE(frame.ok()) << frame.status();
      EXPECT_EQ(frame->has_float32_planes(), keep32);
      EXPECT_EQ(PlanePixels(*frame), kPixels);
      EXPECT_FALSE(frame->fibermap_fits.empty());
      ExpectMatches(ref, *std::move(frame), keep32 ? "float32 planes" : "float64 planes");
    }
  }
}

TEST_F(PlaneDecodeTest, GzipInMemoryBitIdentical) {
  const std::string path = dir_ + "/gz.fits";
  WriteFrame(path, TestPlanes());
  const Reference ref = ReadReference(path);
  const std::string bytes = testing::ReadBytes(path);
  auto gz = GzipCompress(bytes);
  ASSERT_TRUE(gz.ok());
  PreprocOptions o = Options(&pool_, true);
  auto frame = ReadPreprocFromMemory(gz->data(), gz->size(), "gz.fits.gz", o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_TRUE(frame->has_float32_planes());
  ExpectMatches(ref, *std::move(frame), "gzip, float32 planes");
}

// The reader skips groups of float32 pixels whose Float32RuleFlags say the rule keeps them:
// never a pixel the rule would change. Every pair of special and ordinary values.
TEST(PixelRuleTest, Float32FlagsClearOnlyForPixelsTheRuleKeeps) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float values[] = {0.0f, -0.0f, 1.0f, -1.0f, 3.5e12f, -7e-3f, nan, -nan, inf, -inf,
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(), -std::numeric_limits<float>::min()};
  int kept = 0;
  for (float image : values) {
    for (float ivar : values) {
      uint32_t ib, vb;
      std::memcpy(&ib, &image, 4);
      std::memcpy(&vb, &ivar, 4);
      if ((Float32RuleFlags(ib, vb) >> 31) != 0) continue;
      ++kept;
      double im = image, iv = ivar;
      EXPECT_EQ(ApplyPixelRule(0xffff, 0, &im, &iv), 0u) << image << " " << ivar;
      EXPECT_TRUE(static_cast<float>(im) == image && static_cast<float>(iv) == ivar);
      EXPECT_EQ(std::signbit(iv), std::signbit(ivar));
    }
  }
  // Any of the 12 finite images with a finite ivar of clear sign (0, 1, 3.5e12, the
  // positive denormal, max, min).
  EXPECT_EQ(kept, 12 * 6);
}

TEST_F(PlaneDecodeTest, FileWithoutMaskBitIdentical) {
  const std::string path = dir_ + "/nomask.fits";
  WriteFrame(path, TestPlanes(), FLOAT_IMG, 1.0, true, /*with_mask=*/false);
  const Reference ref = ReadReference(path);
  ASSERT_EQ(ref.n_nonfinite, 6u);
  ASSERT_EQ(ref.n_masked, 3u);  // the negative ivars (-2, -1, -FLT_MAX)
  for (TaskPool* pool : {static_cast<TaskPool*>(nullptr), &pool_}) {
    for (bool keep32 : {false, true}) {
      auto frame = ReadPreproc(path, Options(pool, keep32));
      ASSERT_TRUE(frame.ok()) << frame.status();
      ExpectMatches(ref, *std::move(frame), keep32 ? "no mask, float32" : "no mask, float64");
    }
  }
}

// Blocks a load reuses (PreprocOptions::load_buffers: the compressed and inflated bytes,
// the MASK bits) come back holding another frame's bytes; nothing of them may show. The
// other frame is larger, and the frame read after it lacks the padding of its last FITS
// block, which the reader must zero rather than take from the block.
TEST_F(PlaneDecodeTest, GzipFilesReusingDirtyLoadBuffersBitIdentical) {
  const std::string other = dir_ + "/other.fits", path = dir_ + "/gz.fits";
  Planes big = TestPlanes();
  for (float& v : big.image) v = -v;
  for (int16_t& m : big.mask) m = static_cast<int16_t>(~m);
  WriteFrame(other, big, FLOAT_IMG, 1.0, /*compress_mask=*/false);  // other offsets
  WriteFrame(path, TestPlanes());
  const Reference ref = ReadReference(path);
  std::string bytes = testing::ReadBytes(path);
  // Without the last block's padding (zeros), as CFITSIO reads a plain file.
  const std::size_t unpadded = bytes.find_last_not_of('\0') + 1;
  ASSERT_GT(bytes.size() - unpadded, 0u);
  bytes.resize(unpadded);
  std::string other_bytes = testing::ReadBytes(other);
  other_bytes += std::string(2880 * 50, 'J');  // ignored after the last HDU, yet inflated
  auto gz = GzipCompress(bytes), other_gz = GzipCompress(other_bytes);
  ASSERT_TRUE(gz.ok() && other_gz.ok());
  testing::WriteBytes(path + ".gz", *gz);
  testing::WriteBytes(other + ".gz", *other_gz);
  auto plain = ReadPreproc(path, PreprocOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  const std::string plain_fibermap = plain->fibermap_fits;
  for (TaskPool* pool : {static_cast<TaskPool*>(nullptr), &pool_}) {
    for (bool keep32 : {false, true}) {
      PreprocOptions o = Options(pool, keep32);
      o.load_buffers = &load_buffers_;
      const int64_t reused = load_buffers_.reused();
      ASSERT_TRUE(ReadPreproc(other + ".gz", o).ok());
      auto frame = ReadPreproc(path + ".gz", o);
      ASSERT_TRUE(frame.ok()) << frame.status();
      EXPECT_EQ(frame->fibermap_fits, plain_fibermap);
      ExpectMatches(ref, *std::move(frame), keep32 ? "gzip file after another, float32" : "gzip file after another, float64");
      ASSERT_TRUE(ReadPreprocFromMemory(other_gz->data(), other_gz->size(), "o.gz", o).ok());
      auto mem = ReadPreprocFromMemory(gz->data(), gz->size(), "gz.fits.gz", o);
      ASSERT_TRUE(mem.ok()) << mem.status();
      EXPECT_EQ(mem->fibermap_fits, plain_fibermap);
      ExpectMatches(ref, *std::move(mem), "gzip upload after another");
      EXPECT_GE(load_buffers_.reused(), reused + 6);  // gz, FITS and MASK blocks, twice over
    }
  }
}

TEST_F(PlaneDecodeTest, Float64FileKeepsFloat64Planes) {
  const std::string path = dir_ + "/f64.fits";
  WriteFrame(path, TestPlanes(), DOUBLE_IMG, 1.0, /*compress_mask=*/false);
  const Reference ref = ReadReference(path);
  PreprocOptions o;
  o.pool = &pool_;
  o.keep_float32 = true;  // not float32 on disk: float64 planes
  auto frame = ReadPreproc(path, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_FALSE(frame->has_float32_planes());
  ExpectMatches(ref, *std::move(frame), "float64 file");
}

TEST_F(PlaneDecodeTest, ScaledPlaneLeftToCfitsio) {
  const std::string path = dir_ + "/scaled.fits";
  WriteFrame(path, TestPlanes(), FLOAT_IMG, 0.25);
  const Reference ref = ReadReference(path);
  auto f = FitsFile::OpenRead(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->MoveToHdu("IVAR").ok());
  auto raw = f->GetRawFloatImage();
  ASSERT_TRUE(raw.ok());
  EXPECT_FALSE(raw->has_value()) << "a scaled plane is CFITSIO's to read";
  ASSERT_TRUE(f->MoveToHdu("IMAGE").ok());
  raw = f->GetRawFloatImage();
  ASSERT_TRUE(raw.ok() && raw->has_value());
  EXPECT_EQ((*raw)->bitpix, FLOAT_IMG);
  PreprocOptions o;
  o.pool = &pool_;
  o.keep_float32 = true;
  auto frame = ReadPreproc(path, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_FALSE(frame->has_float32_planes());
  ExpectMatches(ref, *std::move(frame), "scaled ivar");
}

TEST_F(PlaneDecodeTest, PixelsReadAfterThePathIsGone) {
  // spexd opens a confined file as /proc/self/fd/N and closes N before decoding: the
  // pixels must come from a descriptor the reader holds, not from the path again.
  const std::string path = dir_ + "/gone.fits";
  WriteFrame(path, TestPlanes());
  const Reference ref = ReadReference(path);
  PreprocOptions o;
  o.pool = &pool_;
  o.keep_float32 = true;
  auto reader = PreprocReader::Open(path, o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto frame = reader->Read();
  ASSERT_TRUE(frame.ok()) << frame.status();
  ExpectMatches(ref, *std::move(frame), "after unlink");
}

TEST_F(PlaneDecodeTest, RawBytesReportTruncation) {
  const std::string path = dir_ + "/t.fits";
  WriteFrame(path, TestPlanes());
  auto f = FitsFile::OpenRead(path);
  ASSERT_TRUE(f.ok());
  auto bytes = f->OpenRawBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->Direct(0, 10), nullptr);  // on disk: read, not mapped
  char buf[16];
  EXPECT_TRUE(bytes->Read(0, 6, buf).ok());
  EXPECT_EQ(std::string(buf, 6), "SIMPLE");
  const int64_t size = static_cast<int64_t>(testing::ReadBytes(path).size());
  const absl::Status past = bytes->Read(size - 4, 8, buf);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("truncated"), std::string::npos) << past;
}

// keep_raw: the planes are the file's own big-endian words and the MASK bits, no rule
// applied; DecodeRawPlanes gives what the host decode gives, counts included.
TEST_F(PlaneDecodeTest, RawPlanesHoldTheFilesBytesAndDecodeBitIdentical) {
  const Planes planes = TestPlanes();
  for (bool with_mask : {true, false}) {
    const std::string path = dir_ + (with_mask ? "/raw.fits" : "/raw-nomask.fits");
    WriteFrame(path, planes, FLOAT_IMG, 1.0, /*compress_mask=*/true, with_mask);
    const Reference ref = ReadReference(path);
    auto gz = GzipCompress(testing::ReadBytes(path));
    ASSERT_TRUE(gz.ok());
    for (bool gzip : {false, true}) {
      for (TaskPool* pool : {static_cast<TaskPool*>(nullptr), &pool_}) {
        const std::string what = absl::StrCat(with_mask ? "mask" : "no mask", gzip ? ", gzip" : "",
                                              pool != nullptr ? ", pool" : "");
        PreprocOptions o = Options(pool, /*keep_float32=*/true);
        o.keep_raw = true;
        o.mask_policy = MaskPolicy::kDesispec;
        auto frame = gzip ? ReadPreprocFromMemory(gz->data(), gz->size(), "raw.fits.gz", o)
                          : ReadPreproc(path, o);
        ASSERT_TRUE(frame.ok()) << what << ": " << frame.status();
        ASSERT_TRUE(frame->has_raw_planes()) << what;
        EXPECT_FALSE(frame->has_float32_planes()) << what;
        EXPECT_TRUE(frame->image.empty()) << what;
        EXPECT_EQ(PlanePixels(*frame), kPixels) << what;
        EXPECT_EQ(frame->n_masked + frame->n_nonfinite, 0u) << what << ": no rule on the host";
        EXPECT_EQ(frame->raw_bad_bits, MaskBadBits(MaskPolicy::kDesispec)) << what;
        EXPECT_FALSE(frame->fibermap_fits.empty()) << what;
        ASSERT_EQ(frame->mask_raw.size(), with_mask ? kPixels : 0u) << what;
        std::size_t differ = 0;
        for (std::size_t i = 0; i < kPixels; ++i) {
          uint32_t im, iv;
          std::memcpy(&im, &planes.image[i], 4);
          std::memcpy(&iv, &planes.ivar[i], 4);
          differ += frame->image_raw[i] != __builtin_bswap32(im);
          differ += frame->ivar_raw[i] != __builtin_bswap32(iv);
          if (with_mask) differ += frame->mask_raw[i] != static_cast<uint16_t>(planes.mask[i]);
        }
        EXPECT_EQ(differ, 0u) << what << ": the file's words, unruled";
        DecodeRawPlanes(&*frame, pool);
        EXPECT_FALSE(frame->has_raw_planes()) << what;
        EXPECT_TRUE(frame->has_float32_planes()) << what;
        ExpectMatches(ref, *std::move(frame), what.c_str());
      }
    }
  }
}

TEST_F(PlaneDecodeTest, RawPlanesOnlyForPlainFloat32Files) {
  const std::string path = dir_ + "/f64.fits";
  WriteFrame(path, TestPlanes(), DOUBLE_IMG);
  const Reference ref = ReadReference(path);
  PreprocOptions o = Options(&pool_, /*keep_float32=*/true);
  o.keep_raw = true;
  auto frame = ReadPreproc(path, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_FALSE(frame->has_raw_planes());  // float64 on disk: decoded and ruled on the host
  ExpectMatches(ref, *std::move(frame), "float64 file, raw asked");
}

TEST_F(PlaneDecodeTest, RawPlanesOfATruncatedFileAreAnError) {
  const std::string path = dir_ + "/cut.fits";
  // IMAGE, IVAR and MASK are in the file; the data of IVAR ends early.
  WriteFrame(path, TestPlanes(), FLOAT_IMG, 1.0, /*compress_mask=*/true, /*with_mask=*/false);
  ASSERT_EQ(truncate(path.c_str(), 2880 * 2 + static_cast<off_t>(kPixels) * 4 + 2880 + 1000), 0);
  PreprocOptions o = Options(&pool_, /*keep_float32=*/true);
  o.keep_raw = true;
  auto frame = ReadPreproc(path, o);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument) << frame.status();
  EXPECT_NE(frame.status().message().find("cut.fits"), std::string::npos) << frame.status();
}

TEST_F(PlaneDecodeTest, RawPlanesWithoutAValidPixelAreRefusedWithTheHostsCounts) {
  Planes planes = TestPlanes();
  for (std::size_t i = 0; i < kPixels; ++i) {
    planes.mask[i] = (planes.ivar[i] > 0 && std::isfinite(planes.image[i])) ? 1 : 0;
  }
  const std::string path = dir_ + "/dead.fits";
  WriteFrame(path, planes);
  std::string messages[2];
  for (bool raw : {false, true}) {
    PreprocOptions o = Options(&pool_, /*keep_float32=*/true);
    o.keep_raw = raw;
    auto frame = ReadPreproc(path, o);
    ASSERT_TRUE(frame.ok()) << frame.status();
    EXPECT_EQ(frame->has_raw_planes(), raw);
    const absl::Status st = CheckImageHasValidPixel(*frame);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    messages[raw ? 1 : 0] = std::string(st.message());
  }
  EXPECT_NE(messages[0].find("masked"), std::string::npos) << messages[0];
  EXPECT_EQ(messages[1], messages[0]) << "the same counts, whoever applies the rules";
  // One valid pixel at the very end is found.
  planes.mask[kPixels - 1] = 0;
  planes.image[kPixels - 1] = 1.0f;
  planes.ivar[kPixels - 1] = 2.0f;
  WriteFrame(path, planes);
  PreprocOptions o = Options(&pool_, /*keep_float32=*/true);
  o.keep_raw = true;
  auto frame = ReadPreproc(path, o);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_TRUE(CheckImageHasValidPixel(*frame).ok());
}

// The preproc fuzzer's corpus and regression inputs (hostile files: truncated, huge or
// inconsistent headers, odd types): read with raw planes, each gives the error the host
// decode gives, or planes that decode to the very same values and counts.
TEST_F(PlaneDecodeTest, RawPlanesOfTheFuzzCorpusAsTheHostDecode) {
  int files = 0, read = 0;
  for (const char* dir : {"/../fuzz/corpus/preproc", "/../fuzz/regressions/preproc"}) {
    for (const auto& e : std::filesystem::directory_iterator(std::string(SPEXD_TEST_DATA_DIR) + dir)) {
      const std::string bytes = testing::ReadBytes(e.path().string());
      const std::string name = e.path().filename().string();
      ++files;
      PreprocOptions o = Options(&pool_, /*keep_float32=*/true);
      auto host = ReadPreprocFromMemory(bytes.data(), bytes.size(), name, o);
      o.keep_raw = true;
      auto raw = ReadPreprocFromMemory(bytes.data(), bytes.size(), name, o);
      ASSERT_EQ(raw.ok(), host.ok()) << name << ": " << raw.status() << " vs " << host.status();
      if (!host.ok()) {
        EXPECT_EQ(raw.status(), host.status()) << name;
        continue;
      }
      ++read;
      DecodeRawPlanes(&*raw, &pool_);
      EXPECT_EQ(raw->n_masked, host->n_masked) << name;
      EXPECT_EQ(raw->n_nonfinite, host->n_nonfinite) << name;
      WidenPlanes(&*raw);
      WidenPlanes(&*host);
      ExpectBitIdentical(host->image, raw->image, name.c_str());
      ExpectBitIdentical(host->ivar, raw->ivar, name.c_str());
    }
  }
  EXPECT_GT(files, 50);
  EXPECT_GT(read, 0) << "some corpus inputs are valid preprocs";
}

TEST(PlaneBufferPoolTest, ReusesUpToItsBoundAndOutlivesIt) {
  auto pool = std::make_unique<PlaneBufferPool>(int64_t{8} << 20);  // four 2 MiB blocks
  const void* first = nullptr;
  {
    auto a = PlaneBuffer<float>::Make(1000, pool.get());
    first = a.data();
    a[999] = 1.5f;
    EXPECT_EQ(a.size(), 1000u);
  }
  EXPECT_EQ(pool->cached_bytes(), int64_t{2} << 20);
  auto b = PlaneBuffer<float>::Make(500, pool.get());
  EXPECT_EQ(b.data(), first) << "the cached block is handed out again";
  EXPECT_EQ(pool->reused(), 1);
  EXPECT_EQ(pool->cached_bytes(), 0);
  {
    // Five blocks back: the bound keeps four.
    std::vector<PlaneBuffer<float>> many;
    for (int i = 0; i < 5; ++i) many.push_back(PlaneBuffer<float>::Make(1000, pool.get()));
  }
  EXPECT_EQ(pool->cached_bytes(), int64_t{8} << 20);
  PlaneBuffer<float> copy = b;  // a copy has its own memory
  EXPECT_NE(copy.data(), b.data());
  pool.reset();  // b outlives the pool and frees its block alone
  b[0] = 2.0f;
  EXPECT_EQ(b[0], 2.0f);
}

}  // namespace
}  // namespace spexd::core
