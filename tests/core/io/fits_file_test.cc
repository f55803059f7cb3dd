#include "core/io/fits_file.h"

#include <fstream>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

TEST(FitsFileTest, RoundTripInMemoryImageAndCards) {
  auto out = FitsFile::CreateMemory("mem.fits");
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> data = {1.5, -2.0, 3.25, 4.0, 5.0, 6.0};
  ASSERT_TRUE(out->WriteImage<double>("FLUX", {3, 2}, data.data()).ok());
  ASSERT_TRUE(out->WriteKey("NSPEC", 2L, "number of spectra").ok());
  ASSERT_TRUE(out->WriteImage<int16_t>("MASK", {3, 2}, std::vector<int16_t>(6, 7).data()).ok());
  auto bytes = out->TakeMemory();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size() % 2880, 0u);

  auto in = FitsFile::OpenMemory(bytes->data(), bytes->size(), "mem.fits");
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE(in->MoveToHdu("FLUX").ok());
  auto info = in->GetImageInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->naxes, (std::vector<long>{3, 2}));
  auto back = in->ReadImage<double>();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, data);
  EXPECT_EQ(*in->ReadLong("NSPEC"), 2);
  auto missing = in->ReadDouble("NOPE");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("NOPE"), std::string::npos);
  ASSERT_TRUE(in->MoveToHdu("MASK").ok());
  EXPECT_EQ(*in->ReadImage<int16_t>(), std::vector<int16_t>(6, 7));
  auto absent = in->MoveToHdu("IVAR");
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(absent.message().find("mem.fits"), std::string::npos);
}

TEST(FitsFileTest, GarbageAndMissingFilesAreErrorsNamingTheFile) {
  std::string dir = testing::MakeTempDir();
  std::string garbage = dir + "/garbage.fits";
  {
    std::ofstream f(garbage);
    for (int i = 0; i < 4000; ++i) f << "not a fits file ";
  }
  auto g = FitsFile::OpenRead(garbage);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("garbage.fits"), std::string::npos);

  auto m = FitsFile::OpenRead(dir + "/absent.fits");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("absent.fits"), std::string::npos);

  std::string small(100, 'x');
  auto s = FitsFile::OpenMemory(small.data(), small.size(), "upload");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("upload"), std::string::npos);
}

// A memory file with an IMAGE and a 4-row binary table TAB.
std::string ImageAndTableBytes() {
  auto out = FitsFile::CreateMemory("src.fits");
  EXPECT_TRUE(out.ok());
  std::vector<float> data(6, 2.5f);
  EXPECT_TRUE(out->WriteImage<float>("IMAGE", {3, 2}, data.data()).ok());
  int status = 0;
  char* ttype[] = {const_cast<char*>("FIBER")};
  char* tform[] = {const_cast<char*>("J")};
  fits_create_tbl(out->get(), BINARY_TBL, 4, 1, ttype, tform, nullptr, "TAB", &status);
  int fibers[] = {7, 8, 9, 10};
  fits_write_col(out->get(), TINT, 1, 1, 1, 4, fibers, &status);
  EXPECT_EQ(status, 0);
  auto bytes = out->TakeMemory();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

TEST(FitsFileTest, CopyTableIntoEmptyFileAddsEmptyPrimary) {
  std::string src_bytes = ImageAndTableBytes();
  auto src = FitsFile::OpenMemory(src_bytes.data(), src_bytes.size(), "src.fits");
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_TRUE(src->MoveToHdu("TAB").ok());
  auto dest = FitsFile::CreateMemory("dest.fits");
  ASSERT_TRUE(dest.ok());
  ASSERT_TRUE(src->CopyCurrentHduTo(*dest).ok());
  auto bytes = dest->TakeMemory();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size(), 3u * 2880u);  // empty primary, table header, table data

  auto in = FitsFile::OpenMemory(bytes->data(), bytes->size(), "dest.fits");
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(*in->NumHdus(), 2);
  auto primary = in->GetImageInfo();
  ASSERT_TRUE(primary.ok());
  EXPECT_TRUE(primary->naxes.empty());
  ASSERT_TRUE(in->MoveToHdu("TAB").ok());
  int status = 0;
  int fibers[4] = {0};
  fits_read_col(in->get(), TINT, 1, 1, 1, 4, nullptr, fibers, nullptr, &status);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(fibers[3], 10);
}

TEST(FitsFileTest, CopyImageIntoEmptyFileBecomesPrimary) {
  std::string src_bytes = ImageAndTableBytes();
  auto src = FitsFile::OpenMemory(src_bytes.data(), src_bytes.size(), "src.fits");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(src->MoveToHdu("IMAGE").ok());
  auto dest = FitsFile::CreateMemory("dest.fits");
  ASSERT_TRUE(dest.ok());
  ASSERT_TRUE(src->CopyCurrentHduTo(*dest).ok());
  auto bytes = dest->TakeMemory();
  ASSERT_TRUE(bytes.ok());
  auto in = FitsFile::OpenMemory(bytes->data(), bytes->size(), "dest.fits");
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(*in->NumHdus(), 1);
  EXPECT_EQ(*in->ReadImage<double>(), std::vector<double>(6, 2.5));
}

TEST(FitsFileTest, MemoryFilesHaveNoPhantomHdus) {
  // Regression: CreateMemory used to hand CFITSIO an uninitialised buffer that CFITSIO
  // treats as existing file content, so stale bytes of an earlier (freed) FITS buffer
  // of the same size could be counted as extra HDUs. Churn the allocator with
  // multi-HDU files, then check that a one-HDU file stays one HDU.
  for (int round = 0; round < 20; ++round) {
    std::string big = ImageAndTableBytes();
    auto out = FitsFile::CreateMemory("one.fits");
    ASSERT_TRUE(out.ok());
    std::vector<int16_t> v(4, 1);
    ASSERT_TRUE(out->WriteImage<int16_t>("ONLY", {2, 2}, v.data()).ok());
    auto bytes = out->TakeMemory();
    ASSERT_TRUE(bytes.ok());
    ASSERT_EQ(bytes->size(), 2u * 2880u) << "round " << round;
    auto in = FitsFile::OpenMemory(bytes->data(), bytes->size(), "one.fits");
    ASSERT_TRUE(in.ok());
    ASSERT_EQ(*in->NumHdus(), 1) << "round " << round;
  }
}

TEST(FitsFileTest, CheckHduCompleteDetectsTruncation) {
  std::string bytes = ImageAndTableBytes();  // IMAGE: blocks 0-1, TAB: blocks 2-3
  auto whole = FitsFile::OpenMemory(bytes.data(), bytes.size(), "whole.fits");
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE(whole->MoveToHdu("TAB").ok());
  EXPECT_TRUE(whole->CheckHduComplete().ok());

  // Cut inside the table's data block: its header is intact, its 16 data bytes are not.
  // The layout check (fits_layout.h) refuses it before CFITSIO reads it.
  auto cut = FitsFile::OpenMemory(bytes.data(), 3 * 2880 + 10, "cut.fits");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cut.status().message().find("cut.fits[TAB]: truncated file"), std::string::npos)
      << cut.status();

  // Only the padding after the last data byte missing: accepted.
  auto unpadded = FitsFile::OpenMemory(bytes.data(), 3 * 2880 + 16, "unpadded.fits");
  ASSERT_TRUE(unpadded.ok());
  ASSERT_TRUE(unpadded->MoveToHdu("TAB").ok());
  EXPECT_TRUE(unpadded->CheckHduComplete().ok());
}

}  // namespace
}  // namespace spexd::core
