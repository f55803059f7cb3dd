// A RICE_1 16-bit image decoded tile by tile on a pool gives fits_read_pix's pixels (int16
// and uint16, row tiles and rectangular tiles cut at the edges, from memory and from disk);
// other HDUs are left to CFITSIO; a tile changed on disk after the file was checked is an
// error, read only inside its copy.
#include "core/io/internal/rice_image_tiles.h"

#include <fcntl.h>
#include <fitsio.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/base/parallel_for.h"
#include "gtest/gtest.h"
#include "tests/compressed_fits.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using testing::TileCompression;

constexpr long kMaskWidth = 301, kMaskHeight = 23;

// Values with every kind of RICE block: runs of one value (all-zero differences), small
// differences, and full-range ones (stored verbatim).
std::vector<unsigned short> MaskValues() {
  std::mt19937 rng(7);
  std::vector<unsigned short> v(static_cast<std::size_t>(kMaskWidth * kMaskHeight));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t row = i / kMaskWidth;
    if (row % 3 == 0) {
      v[i] = row == 0 ? 0 : 4;
    } else if (row % 3 == 1) {
      v[i] = static_cast<unsigned short>(rng() % 16);
    } else {
      v[i] = static_cast<unsigned short>(rng());
    }
  }
  return v;
}

// A FITS file (empty primary, then image MASK of `bitpix` SHORT_IMG or USHORT_IMG),
// uncompressed.
std::string PlainMaskFile(int bitpix) {
  const std::string path = testing::MakeTempDir() + "/mask.fits";
  fitsfile* f = nullptr;
  int status = 0;
  fits_create_file(&f, ("!" + path).c_str(), &status);
  long naxes[2] = {kMaskWidth, kMaskHeight};
  fits_create_img(f, SHORT_IMG, 0, nullptr, &status);
  fits_create_img(f, bitpix, 2, naxes, &status);
  fits_write_key(f, TSTRING, "EXTNAME", const_cast<char*>("MASK"), nullptr, &status);
  std::vector<unsigned short> v = MaskValues();
  fits_write_img(f, bitpix == USHORT_IMG ? TUSHORT : TSHORT, 1, static_cast<LONGLONG>(v.size()),
                 v.data(), &status);
  fits_close_file(f, &status);
  EXPECT_EQ(status, 0);
  return testing::ReadBytes(path);
}

std::string Compressed(int bitpix, TileCompression c) {
  auto fits = testing::RecompressHdus(PlainMaskFile(bitpix), {{"MASK", c}});
  EXPECT_TRUE(fits.ok()) << fits.status();
  return fits.value_or("");
}

// fits_read_pix's pixels of MASK, as the preproc reader asks for them.
std::vector<unsigned short> CfitsioPixels(FitsFile& file, int type) {
  std::vector<unsigned short> out(static_cast<std::size_t>(kMaskWidth * kMaskHeight));
  int status = 0, anynul = 0;
  long first[2] = {1, 1};
  fits_read_pix(file.get(), type, first, static_cast<LONGLONG>(out.size()), nullptr, out.data(),
                &anynul, &status);
  EXPECT_EQ(status, 0);
  return out;
}

absl::StatusOr<bool> Decode(FitsFile& file, std::vector<unsigned short>* out, TaskPool* pool) {
  out->assign(static_cast<std::size_t>(kMaskWidth * kMaskHeight), 0xABCD);
  return internal::DecodeRiceTiles16(file, kMaskWidth * kMaskHeight, out->data(), pool);
}

TEST(RiceImageTilesTest, GivesCfitsiosPixelsForEveryTileShapeAndSign) {
  auto pool = MakeTaskPool(3);
  const std::vector<std::vector<long>> tiles = {{}, {7, 5}, {kMaskWidth, 4}, {64, 1}};
  for (int bitpix : {SHORT_IMG, USHORT_IMG}) {
    for (const auto& tile : tiles) {
      SCOPED_TRACE(::testing::Message() << "bitpix " << bitpix << ", tile " << tile.size());
      const std::string fits = Compressed(bitpix, {11, false, tile});
      const std::string path = testing::MakeTempDir() + "/m.fits";
      std::ofstream(path, std::ios::binary) << fits;
      auto in_memory = FitsFile::OpenMemory(fits, "mask");
      auto on_disk = FitsFile::OpenRead(path);
      ASSERT_TRUE(in_memory.ok() && on_disk.ok());
      for (FitsFile* file : {&*in_memory, &*on_disk}) {
        ASSERT_TRUE(file->MoveToHdu("MASK").ok());
        const std::vector<unsigned short> want =
            CfitsioPixels(*file, bitpix == USHORT_IMG ? TUSHORT : TSHORT);
        for (TaskPool* p : {pool.get(), static_cast<TaskPool*>(nullptr)}) {
          std::vector<unsigned short> got;
          auto decoded = Decode(*file, &got, p);
          ASSERT_TRUE(decoded.ok()) << decoded.status();
          EXPECT_TRUE(*decoded);
          EXPECT_EQ(got, want);
        }
      }
    }
  }
}

TEST(RiceImageTilesTest, LeavesOtherCodecsAndPlainImagesToCfitsio) {
  for (const std::string& fits :
       {Compressed(SHORT_IMG, {21, false, {}}), PlainMaskFile(SHORT_IMG)}) {
    auto file = FitsFile::OpenMemory(fits, "mask");
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE(file->MoveToHdu("MASK").ok());
    std::vector<unsigned short> got;
    auto decoded = Decode(*file, &got, nullptr);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_FALSE(*decoded);
    EXPECT_EQ(got[0], 0xABCD);  // untouched
  }
}

TEST(RiceImageTilesTest, ATileChangedAfterTheCheckIsAnErrorReadInsideItsCopy) {
  // Full-range values need 2 bytes a pixel; a stream of 0xFF bytes announces verbatim
  // blocks, so its decoder runs out of bytes mid-tile (and ASan sees any read past the
  // copy).
  const std::string fits = Compressed(SHORT_IMG, {11, false, {}});
  auto tile = testing::FirstTile(fits, "MASK");
  ASSERT_TRUE(tile.ok()) << tile.status();
  const std::string path = testing::MakeTempDir() + "/m.fits";
  std::ofstream(path, std::ios::binary) << fits;
  auto file = FitsFile::OpenRead(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(file->MoveToHdu("MASK").ok());
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::string junk(static_cast<std::size_t>(tile->second), '\xff');
  ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), tile->first),
            static_cast<ssize_t>(junk.size()));
  ::close(fd);
  std::vector<unsigned short> got;
  auto decoded = Decode(*file, &got, nullptr);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("tile 1 "), std::string::npos) << decoded.status();
  EXPECT_NE(decoded.status().message().find("[MASK]"), std::string::npos) << decoded.status();
}

}  // namespace
}  // namespace spexd::core
