#include "core/io/preproc.h"

#include <fitsio.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/io/fits_file.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using testing::ReadBytes;

enum class MaskKind { kNone, kInt16, kUint16Compressed, kInt32, kFloat };

// A small preproc-like file (spec §5.1), written with CFITSIO so that each test can
// break one thing.
struct FakePreproc {
  int height = 6, width = 7;
  std::vector<double> image{}, ivar{};  // continued with image = index, ivar = 1 + index
  int image_bitpix = FLOAT_IMG, ivar_bitpix = FLOAT_IMG;
  std::vector<long> ivar_naxes{}, mask_naxes{};  // override shapes ({width, height} default)
  MaskKind mask_kind = MaskKind::kUint16Compressed;
  std::vector<int32_t> mask{};  // default: zeros
  bool image_primary = true;
  bool fibermap = true;
  long fibermap_rows = 12;
};

std::size_t Count(const std::vector<long>& naxes) {
  std::size_t n = 1;
  for (long a : naxes) n *= static_cast<std::size_t>(a);
  return n;
}

void WritePlane(FitsFile& f, const char* name, int bitpix, const std::vector<long>& naxes,
                std::vector<double> values) {
  values.resize(Count(naxes), 0.5);
  absl::Status st;
  if (bitpix == DOUBLE_IMG) {
    st = f.WriteImage<double>(name, naxes, values.data());
  } else if (bitpix == FLOAT_IMG) {
    std::vector<float> v(values.begin(), values.end());
    st = f.WriteImage<float>(name, naxes, v.data());
  } else {
    std::vector<int32_t> v(values.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(values[i]);
    st = f.WriteImage<int32_t>(name, naxes, v.data());
  }
  ASSERT_TRUE(st.ok()) << st;
}

void WriteFibermap(FitsFile& f, long nrows) {
  int status = 0;
  char* ttype[] = {const_cast<char*>("TARGETID"), const_cast<char*>("FIBER"),
                   const_cast<char*>("OBJTYPE")};
  char* tform[] = {const_cast<char*>("K"), const_cast<char*>("J"), const_cast<char*>("3A")};
  fits_create_tbl(f.get(), BINARY_TBL, nrows, 3, ttype, tform, nullptr, "FIBERMAP", &status);
  std::vector<LONGLONG> targetid(static_cast<std::size_t>(nrows));
  std::vector<int> fiber(static_cast<std::size_t>(nrows));
  for (long i = 0; i < nrows; ++i) {
    targetid[static_cast<std::size_t>(i)] = 39627000000LL + i;
    fiber[static_cast<std::size_t>(i)] = static_cast<int>(i);
  }
  fits_write_col(f.get(), TLONGLONG, 1, 1, 1, nrows, targetid.data(), &status);
  fits_write_col(f.get(), TINT, 2, 1, 1, nrows, fiber.data(), &status);
  long tileid = 80605;
  fits_update_key(f.get(), TLONG, "TILEID", &tileid, nullptr, &status);
  ASSERT_EQ(status, 0);
}

void WriteFake(const FakePreproc& p, const std::string& path) {
  auto f = FitsFile::Create(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<long> shape = {p.width, p.height};
  std::vector<double> image = p.image, ivar = p.ivar;
  for (std::size_t i = image.size(); i < Count(shape); ++i) {
    image.push_back(static_cast<double>(i));
  }
  for (std::size_t i = ivar.size(); i < Count(shape); ++i) {
    ivar.push_back(1.0 + static_cast<double>(i));
  }
  int status = 0;
  if (!p.image_primary) {
    fits_create_img(f->get(), BYTE_IMG, 0, nullptr, &status);
    ASSERT_EQ(status, 0);
  }
  WritePlane(*f, "IMAGE", p.image_bitpix, shape, image);
  ASSERT_TRUE(f->WriteKey("CAMERA", std::string("r0"), "Spectrograph Camera").ok());
  WritePlane(*f, "IVAR", p.ivar_bitpix, p.ivar_naxes.empty() ? shape : p.ivar_naxes, ivar);
  if (p.mask_kind != MaskKind::kNone) {
    std::vector<long> mshape = p.mask_naxes.empty() ? shape : p.mask_naxes;
    std::vector<int32_t> mask = p.mask;
    mask.resize(Count(mshape), 0);
    if (p.mask_kind == MaskKind::kUint16Compressed) {
      // As desispec writes it: a RICE-compressed uint16 (int16 + BZERO 32768) image.
      fits_set_compression_type(f->get(), RICE_1, &status);
      std::vector<uint16_t> v(mask.begin(), mask.end());
      fits_create_img(f->get(), USHORT_IMG, 2, mshape.data(), &status);
      fits_update_key(f->get(), TSTRING, "EXTNAME", const_cast<char*>("MASK"), nullptr, &status);
      long fpixel[2] = {1, 1};
      fits_write_pix(f->get(), TUSHORT, fpixel, static_cast<LONGLONG>(v.size()), v.data(),
                     &status);
      fits_set_compression_type(f->get(), NOCOMPRESS, &status);
      ASSERT_EQ(status, 0);
    } else if (p.mask_kind == MaskKind::kInt16) {
      std::vector<int16_t> v(mask.begin(), mask.end());
      ASSERT_TRUE(f->WriteImage<int16_t>("MASK", mshape, v.data()).ok());
    } else if (p.mask_kind == MaskKind::kInt32) {
      ASSERT_TRUE(f->WriteImage<int32_t>("MASK", mshape, mask.data()).ok());
    } else {
      std::vector<float> v(mask.begin(), mask.end());
      ASSERT_TRUE(f->WriteImage<float>("MASK", mshape, v.data()).ok());
    }
  }
  if (p.fibermap) WriteFibermap(*f, p.fibermap_rows);
  ASSERT_TRUE(f->Close().ok());
}

std::string WriteTemp(const FakePreproc& p, const std::string& name = "preproc.fits") {
  std::string path = testing::MakeTempDir() + "/" + name;
  WriteFake(p, path);
  return path;
}

PreprocImage ReadOk(const std::string& path, PreprocOptions options = {}) {
  auto frame = ReadPreproc(path, options);
  EXPECT_TRUE(frame.ok()) << frame.status();
  return frame.ok() ? *std::move(frame) : PreprocImage{};
}

TEST(PreprocTest, ReadsFloat32PlanesHeaderAndFibermap) {
  std::string path = WriteTemp({.image = {1.5, -2.25, 3.0}});
  PreprocImage f = ReadOk(path);
  EXPECT_EQ(f.height, 6);
  EXPECT_EQ(f.width, 7);
  ASSERT_EQ(f.image.size(), 42u);
  ASSERT_EQ(f.ivar.size(), 42u);
  EXPECT_EQ(f.image[0], 1.5);
  EXPECT_EQ(f.image[1], -2.25);
  EXPECT_EQ(f.image[41], 41.0);
  EXPECT_EQ(f.ivar[41], 42.0);  // row-major, NAXIS1 fastest
  EXPECT_EQ(f.n_masked, 0u);
  EXPECT_EQ(f.n_nonfinite, 0u);
  EXPECT_EQ(f.source_name, path);
  bool camera = false;
  for (const std::string& card : f.image_header) {
    camera = camera || card.rfind("CAMERA  = 'r0", 0) == 0;
    EXPECT_NE(card.rfind("NAXIS", 0), 0u) << card;
  }
  EXPECT_TRUE(camera);
  EXPECT_FALSE(f.fibermap_fits.empty());
}

TEST(PreprocTest, Float64PlanesInAnExtension) {
  PreprocImage f = ReadOk(WriteTemp({.image = {0.1, 1.0 / 3.0},
                                     .ivar = {1e-300, 2.0 / 3.0},
                                     .image_bitpix = DOUBLE_IMG,
                                     .ivar_bitpix = DOUBLE_IMG,
                                     .image_primary = false}));
  EXPECT_EQ(f.image[0], 0.1);
  EXPECT_EQ(f.image[1], 1.0 / 3.0);
  EXPECT_EQ(f.ivar[0], 1e-300);
  EXPECT_EQ(f.ivar[1], 2.0 / 3.0);
}

// Bits: 0x1 BAD, 0x2 HOT, 0x100 BADREADNOISE (outside 0x2FF), 0x200 (bit 9, inside),
// 0x400 (outside), 0x8000 (outside).
const std::vector<int32_t> kMaskBits = {0, 0x1, 0x2, 0x100, 0x200, 0x400, 0x8000, 0x103};

TEST(PreprocTest, CompressedMaskUnderBothPolicies) {
  std::string path = WriteTemp({.mask = kMaskBits});
  {
    // The MASK really is tile-compressed on disk (a BINTABLE with ZIMAGE).
    auto file = FitsFile::OpenRead(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->MoveToHdu("MASK").ok());
    int status = 0;
    EXPECT_EQ(fits_is_compressed_image(file->get(), &status), 1);
  }
  PreprocImage d = ReadOk(path);
  const std::vector<double> desispec = {1, 0, 0, 4, 0, 6, 7, 0};
  for (std::size_t i = 0; i < desispec.size(); ++i) {
    EXPECT_EQ(d.ivar[i], desispec[i]) << "pixel " << i << " mask " << kMaskBits[i];
    EXPECT_EQ(d.image[i], static_cast<double>(i)) << "the image is not zeroed by the mask";
  }
  EXPECT_EQ(d.n_masked, 4u);  // 0x1, 0x2, 0x200, 0x103

  PreprocImage a = ReadOk(path, {.mask_policy = MaskPolicy::kAnyBit});
  for (std::size_t i = 1; i < kMaskBits.size(); ++i) EXPECT_EQ(a.ivar[i], 0.0) << i;
  EXPECT_EQ(a.ivar[0], 1.0);
  EXPECT_EQ(a.n_masked, 7u);
}

TEST(PreprocTest, PlainInt16MaskKeepsBitPattern) {
  // -32768 = bit 15
  std::string path = WriteTemp({.mask_kind = MaskKind::kInt16, .mask = {0, -32768, 0x100, 0x8}});
  PreprocImage d = ReadOk(path);
  EXPECT_EQ(d.ivar[1], 2.0);
  EXPECT_EQ(d.ivar[2], 3.0);
  EXPECT_EQ(d.ivar[3], 0.0);
  EXPECT_EQ(d.n_masked, 1u);
  PreprocImage a = ReadOk(path, {.mask_policy = MaskPolicy::kAnyBit});
  EXPECT_EQ(a.ivar[1], 0.0);
  EXPECT_EQ(a.ivar[2], 0.0);
  EXPECT_EQ(a.n_masked, 3u);
}

TEST(PreprocTest, Int32MaskAndNoMask) {
  FakePreproc p;
  p.mask_kind = MaskKind::kInt32;
  p.mask = {0x10, 0x100};
  PreprocImage d = ReadOk(WriteTemp(p));
  EXPECT_EQ(d.ivar[0], 0.0);
  EXPECT_EQ(d.ivar[1], 2.0);
  p.mask_kind = MaskKind::kNone;
  PreprocImage n = ReadOk(WriteTemp(p));
  EXPECT_EQ(n.ivar[0], 1.0);
  EXPECT_EQ(n.n_masked, 0u);
}

TEST(PreprocTest, NonFiniteAndNegativeIvarPixels) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  FakePreproc p;
  p.image = {nan, 1.0, -inf, nan, 4.0, 5.0};
  p.ivar = {1.0, inf, 1.0, 1.0, nan, -2.0};
  p.mask = {0, 0, 0, 0x1, 0, 0};
  PreprocImage f = ReadOk(WriteTemp(p));
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(f.image[i], 0.0) << i;  // also pixel 1: finite image, Inf ivar
    EXPECT_EQ(f.ivar[i], 0.0) << i;
  }
  EXPECT_EQ(f.image[5], 5.0);  // negative ivar: image kept, ivar 0
  EXPECT_EQ(f.ivar[5], 0.0);
  EXPECT_EQ(f.n_nonfinite, 5u);
  EXPECT_EQ(f.n_masked, 2u);  // the masked NaN pixel and the negative ivar
}

TEST(PreprocTest, ApplyPixelRulesOnInMemoryFrame) {
  PreprocImage f;
  f.image = {1.0, 2.0, 3.0};
  f.ivar = {1.0, 1.0, 1.0};
  const uint16_t mask[] = {0x100, 0x4, 0};
  ApplyPixelRules(mask, MaskPolicy::kDesispec, &f);
  EXPECT_EQ(f.ivar, (std::vector<double>{1.0, 0.0, 1.0}));
  EXPECT_EQ(f.n_masked, 1u);
  ApplyPixelRules(nullptr, MaskPolicy::kAnyBit, &f);
  EXPECT_EQ(f.n_masked, 0u);  // counters are set, not accumulated
}

TEST(PreprocTest, FibermapCarriedThrough) {
  PreprocImage f = ReadOk(WriteTemp({.fibermap_rows = 500}));
  auto fm = FitsFile::OpenMemory(f.fibermap_fits.data(), f.fibermap_fits.size(), "fibermap");
  ASSERT_TRUE(fm.ok()) << fm.status();
  EXPECT_EQ(*fm->NumHdus(), 2);
  ASSERT_TRUE(fm->MoveToHdu("FIBERMAP").ok());
  int status = 0, ncols = 0;
  long nrows = 0;
  fits_get_num_rows(fm->get(), &nrows, &status);
  fits_get_num_cols(fm->get(), &ncols, &status);
  EXPECT_EQ(nrows, 500);
  EXPECT_EQ(ncols, 3);
  int colnum = 0;
  fits_get_colnum(fm->get(), CASEINSEN, const_cast<char*>("FIBER"), &colnum, &status);
  std::vector<int> fiber(500);
  fits_read_col(fm->get(), TINT, colnum, 1, 1, 500, nullptr, fiber.data(), nullptr, &status);
  std::vector<LONGLONG> tid(2);
  fits_read_col(fm->get(), TLONGLONG, 1, 499, 1, 2, nullptr, tid.data(), nullptr, &status);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(fiber[0], 0);
  EXPECT_EQ(fiber[499], 499);
  EXPECT_EQ(tid[1], 39627000499LL);
  EXPECT_EQ(*fm->ReadLong("TILEID"), 80605);
}

TEST(PreprocTest, FibermapOptionalUnlessRequired) {
  std::string path = WriteTemp({.fibermap = false});
  EXPECT_TRUE(ReadOk(path).fibermap_fits.empty());
  auto r = ReadPreproc(path, {.require_fibermap = true});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("missing FIBERMAP"), std::string::npos) << r.status();
}

TEST(PreprocTest, ReadFromMemoryMatchesFile) {
  std::string path = WriteTemp({.mask = kMaskBits});
  PreprocImage a = ReadOk(path);
  std::string bytes = ReadBytes(path);
  auto b = ReadPreprocFromMemory(bytes.data(), bytes.size(), "upload.fits", {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->image, a.image);
  EXPECT_EQ(b->ivar, a.ivar);
  EXPECT_EQ(b->n_masked, a.n_masked);
  EXPECT_EQ(b->image_header, a.image_header);
  EXPECT_EQ(b->fibermap_fits, a.fibermap_fits);
  EXPECT_EQ(b->source_name, "upload.fits");
}

// Found by fuzzing (tests/fuzz/regressions/preproc/): CFITSIO's memory driver reads whole
// 2880-byte records, so an upload whose last record is cut short made it read past the
// buffer (an ASan heap-buffer-overflow). Without its trailing padding the file still holds
// every pixel: it must read the same as the whole file.
TEST(PreprocTest, UploadWithoutTrailingPaddingReadsTheSame) {
  std::string path = WriteTemp({.mask = kMaskBits});
  PreprocImage whole = ReadOk(path);
  std::string bytes = ReadBytes(path);
  // Where the last HDU's data ends (before its padding).
  fitsfile* f = nullptr;
  int status = 0, nhdu = 0;
  fits_open_file(&f, path.c_str(), READONLY, &status);
  fits_get_num_hdus(f, &nhdu, &status);
  fits_movabs_hdu(f, nhdu, nullptr, &status);
  LONGLONG headstart = 0, datastart = 0, dataend = 0;
  fits_get_hduaddrll(f, &headstart, &datastart, &dataend, &status);
  long naxis1 = 0, naxis2 = 0;
  fits_read_key(f, TLONG, "NAXIS1", &naxis1, nullptr, &status);
  fits_read_key(f, TLONG, "NAXIS2", &naxis2, nullptr, &status);
  fits_close_file(f, &status);
  ASSERT_EQ(status, 0);
  const std::size_t data_end = static_cast<std::size_t>(datastart) +
                               static_cast<std::size_t>(naxis1) * static_cast<std::size_t>(naxis2);
  ASSERT_LT(data_end, bytes.size());
  ASSERT_NE(data_end % 2880, 0u) << "the test needs a last record that is not full";
  bytes.resize(data_end);
  auto cut = ReadPreprocFromMemory(bytes.data(), bytes.size(), "upload.fits", {});
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->image, whole.image);
  EXPECT_EQ(cut->ivar, whole.ivar);
  EXPECT_EQ(cut->fibermap_fits, whole.fibermap_fits);
}

// --- Bad inputs: each is INVALID_ARGUMENT naming the file and the problem. ---

void ExpectInvalid(const absl::StatusOr<PreprocImage>& r, const std::string& name,
                   const std::string& problem) {
  ASSERT_FALSE(r.ok()) << "expected an error about: " << problem;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(problem), std::string::npos) << r.status();
}

void ExpectInvalid(const FakePreproc& p, const std::string& problem) {
  std::string path = WriteTemp(p, "bad.fits");
  ExpectInvalid(ReadPreproc(path, {}), "bad.fits", problem);
}

// A file of float32 planes with these EXTNAMEs and FITS shapes (NAXIS1 first).
std::string WritePlanes(const std::vector<std::pair<const char*, std::vector<long>>>& planes) {
  std::string path = testing::MakeTempDir() + "/bad.fits";
  auto f = FitsFile::Create(path);
  EXPECT_TRUE(f.ok());
  for (const auto& [name, naxes] : planes) {
    std::vector<float> v(Count(naxes), 1.0f);
    EXPECT_TRUE(f->WriteImage<float>(name, naxes, v.data()).ok());
  }
  return path;
}

TEST(PreprocBadInputTest, MissingHdu) {
  ExpectInvalid(ReadPreproc(WritePlanes({{"IMAGE", {3, 2}}, {"IVRA", {3, 2}}}), {}), "bad.fits",
                "missing IVAR HDU");
  ExpectInvalid(ReadPreproc(WritePlanes({{"FLUX", {3, 2}}, {"IVAR", {3, 2}}}), {}), "bad.fits",
                "missing IMAGE HDU");
}

TEST(PreprocBadInputTest, IntegerImageIsWrongPixelType) {
  ExpectInvalid({.image_bitpix = LONG_IMG}, "wrong pixel type: BITPIX 32");
}

TEST(PreprocBadInputTest, IntegerIvarIsWrongPixelType) {
  ExpectInvalid({.ivar_bitpix = LONG_IMG}, "[IVAR]: wrong pixel type");
}

TEST(PreprocBadInputTest, FloatMaskIsWrongPixelType) {
  ExpectInvalid({.mask_kind = MaskKind::kFloat}, "wrong pixel type for MASK");
}

TEST(PreprocBadInputTest, Int32MaskBeyond16Bits) {
  ExpectInvalid({.mask_kind = MaskKind::kInt32, .mask = {0, 0x10000}},
                "does not fit in 16 mask bits");
}

TEST(PreprocBadInputTest, ImageIvarShapeMismatch) {
  ExpectInvalid({.ivar_naxes = {7, 5}}, "IVAR shape [5][7] does not match IMAGE shape [6][7]");
}

TEST(PreprocBadInputTest, ImageMaskShapeMismatch) {
  ExpectInvalid({.mask_naxes = {6, 7}}, "MASK shape [7][6] does not match IMAGE shape [6][7]");
}

TEST(PreprocBadInputTest, EmptyImage) {
  // A primary HDU with NAXIS = 0 (as an IMAGE), and a 0-length axis.
  std::string path = WritePlanes({{"IMAGE", {}}, {"IVAR", {3, 2}}});
  ExpectInvalid(ReadPreproc(path, {}), "bad.fits", "empty image [] (NAXIS = 0)");
  path = WritePlanes({{"IMAGE", {3, 0}}, {"IVAR", {3, 2}}});
  ExpectInvalid(ReadPreproc(path, {}), "bad.fits", "empty image [0][3]");
}

TEST(PreprocBadInputTest, ThreeDimensionalImage) {
  std::string path = WritePlanes({{"IMAGE", {4, 3, 2}}, {"IVAR", {4, 3, 2}}});
  ExpectInvalid(ReadPreproc(path, {}), "bad.fits", "image must be 2-D, is [2][3][4]");
}

TEST(PreprocBadInputTest, ImageHduIsATable) {
  std::string path = testing::MakeTempDir() + "/bad.fits";
  {
    auto f = FitsFile::Create(path);
    ASSERT_TRUE(f.ok());
    int status = 0;
    fits_create_img(f->get(), BYTE_IMG, 0, nullptr, &status);
    ASSERT_EQ(status, 0);
    WriteFibermap(*f, 3);
    ASSERT_TRUE(f->WriteKey("EXTNAME", std::string("IMAGE"), nullptr).ok());
  }
  ExpectInvalid(ReadPreproc(path, {}), "bad.fits", "is not an image HDU");
}

TEST(PreprocBadInputTest, FibermapThatIsNotATable) {
  std::string path = WritePlanes({{"IMAGE", {3, 2}}, {"IVAR", {3, 2}}, {"FIBERMAP", {3, 2}}});
  ExpectInvalid(ReadPreproc(path, {}), "bad.fits", "FIBERMAP is not a binary table");
}

TEST(PreprocBadInputTest, GarbageBytes) {
  std::string garbage;
  for (int i = 0; i < 400; ++i) garbage += "this is not a FITS file at all ";
  ExpectInvalid(ReadPreprocFromMemory(garbage.data(), garbage.size(), "junk.fits", {}),
                "junk.fits", "cannot open as FITS");
  ExpectInvalid(ReadPreprocFromMemory(garbage.data(), 100, "tiny.fits", {}), "tiny.fits",
                "not a FITS file");
  std::string path = testing::MakeTempDir() + "/junk.fits";
  std::ofstream(path, std::ios::binary) << garbage;
  ExpectInvalid(ReadPreproc(path, {}), "junk.fits", "cannot open as FITS");
  ExpectInvalid(ReadPreproc(path + ".absent", {}), "junk.fits.absent", "cannot open");
}

TEST(PreprocBadInputTest, TruncatedFile) {
  // 48000 bytes per float32 plane: 17 blocks.
  std::string path = WriteTemp({.height = 100, .width = 120}, "good.fits");
  std::string bytes = ReadBytes(path);
  // Cut inside the IVAR data: header blocks are found, the pixel read runs out.
  const std::size_t ivar_data = 2880 + 17 * 2880 + 2880;
  std::string cut = bytes.substr(0, ivar_data + 5000);
  ExpectInvalid(ReadPreprocFromMemory(cut.data(), cut.size(), "cut.fits", {}), "cut.fits",
                "truncated");
  std::string cut_path = testing::MakeTempDir() + "/cut.fits";
  std::ofstream(cut_path, std::ios::binary) << cut;
  ExpectInvalid(ReadPreproc(cut_path, {}), "cut.fits", "truncated");
  // Every cut fails (with a required FIBERMAP: FITS has no end marker, so a cut exactly
  // before an optional last HDU would read as a valid file without it).
  for (std::size_t size = 2880; size + 2880 <= bytes.size(); size += 1440) {
    auto r = ReadPreprocFromMemory(bytes.data(), size, "cut.fits", {.require_fibermap = true});
    EXPECT_FALSE(r.ok()) << "cut at " << size << " of " << bytes.size();
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    }
  }
  EXPECT_TRUE(ReadPreprocFromMemory(bytes.data(), bytes.size(), "good.fits", {}).ok());
  // Missing trailing padding after the last table's data is tolerated, as CFITSIO does.
  EXPECT_TRUE(ReadPreprocFromMemory(bytes.data(), bytes.size() - 1440, "pad.fits", {}).ok());
}

// A float64 plane may hold finite values beyond float32's range, which no preproc holds and
// which the frame's float32 FLUX and IVAR would hold as inf: refused, naming the HDU and
// the pixel. The largest float32 values, and non-finite ones (the pixel rules), are read.
TEST(PreprocBadInputTest, Float64ValuesBeyondFloat32AreRefused) {
  ExpectInvalid({.image = {1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, -1e39},
                 .image_bitpix = DOUBLE_IMG},
                "bad.fits[IMAGE]: pixel (y 1, x 1) = -1e+39 is beyond float32's range");
  ExpectInvalid({.ivar = {1.0, 2.0, 4e38}, .ivar_bitpix = DOUBLE_IMG},
                "bad.fits[IVAR]: pixel (y 0, x 2) = 4e+38 is beyond float32's range");
  const double largest = std::numeric_limits<float>::max();
  PreprocImage f = ReadOk(WriteTemp({.image = {largest, -largest, std::numeric_limits<double>::infinity()},
                                     .ivar = {largest},
                                     .image_bitpix = DOUBLE_IMG,
                                     .ivar_bitpix = DOUBLE_IMG}));
  EXPECT_EQ(f.image[0], largest);
  EXPECT_EQ(f.image[1], -largest);
  EXPECT_EQ(f.ivar[0], largest);
  EXPECT_EQ(f.n_nonfinite, 1u);
}

}  // namespace
}  // namespace spexd::core
