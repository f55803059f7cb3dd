// The real case-A preproc frame (spec §5.1 layout): the
// desispec pixel rules on real MASK bits, the header and the fibermap. Skipped where
// the reference data is absent.
#include <fitsio.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/fits_file.h"
#include "core/io/preproc.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

TEST(PreprocCaseATest, ReadsRealPreproc) {
  SPEXD_REQUIRE_SHARED_DATA(path, "caseA/preproc.fits.gz");
  std::vector<uint16_t> mask;
  std::vector<double> raw_ivar;
  {
    auto file = FitsFile::OpenRead(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE(file->MoveToHdu("MASK").ok());
    auto m = file->ReadImage<uint16_t>();
    ASSERT_TRUE(m.ok()) << m.status();
    mask = *std::move(m);
    ASSERT_TRUE(file->MoveToHdu("IVAR").ok());
    auto iv = file->ReadImage<double>();
    ASSERT_TRUE(iv.ok()) << iv.status();
    raw_ivar = *std::move(iv);
  }
  auto read = ReadPreproc(path, {.require_fibermap = true});
  ASSERT_TRUE(read.ok()) << read.status();
  const PreprocImage& f = *read;
  EXPECT_EQ(f.height, 4128);
  EXPECT_EQ(f.width, 4114);
  ASSERT_EQ(f.ivar.size(), 4128u * 4114u);
  ASSERT_EQ(mask.size(), f.ivar.size());
  std::size_t n_desispec = 0, n_any = 0, n_hot = 0;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    n_desispec += (mask[i] & kDesispecExtractMask) != 0;
    n_any += mask[i] != 0;
    if (mask[i] & 0x2) {  // HOT: flagged in MASK only, IVAR is nonzero on disk
      ++n_hot;
      EXPECT_GT(raw_ivar[i], 0.0) << i;
      EXPECT_EQ(f.ivar[i], 0.0) << i;
    }
    if (mask[i] != 0) {
      ASSERT_EQ(f.ivar[i], 0.0) << i;
    }
  }
  EXPECT_EQ(n_hot, 6u);
  EXPECT_EQ(f.n_masked, n_desispec);
  EXPECT_EQ(n_any, n_desispec);  // case A has only bits inside 0x2FF
  EXPECT_EQ(f.n_nonfinite, 0u);
  bool camera = false;
  for (const std::string& card : f.image_header) {
    camera = camera || card.rfind("CAMERA  = 'r0", 0) == 0;
  }
  EXPECT_TRUE(camera);
  auto fm = FitsFile::OpenMemory(f.fibermap_fits.data(), f.fibermap_fits.size(), "fibermap");
  ASSERT_TRUE(fm.ok()) << fm.status();
  ASSERT_TRUE(fm->MoveToHdu("FIBERMAP").ok());
  int status = 0;
  long nrows = 0;
  fits_get_num_rows(fm->get(), &nrows, &status);
  EXPECT_EQ(nrows, 500);
}

}  // namespace
}  // namespace spexd::core
