#include "core/fits_file.h"

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

}  // namespace
}  // namespace spexd::core
