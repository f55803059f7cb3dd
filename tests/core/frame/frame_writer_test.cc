#include "core/frame/frame_writer.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/io/fits_file.h"
#include "core/base/version.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

Frame SmallFrame() {
  Frame f;
  f.specmin = 2;
  f.nspec = 3;
  f.nwave = 4;
  f.ndiag = 1;
  f.wave = {5760.0, 5760.8000000000002, 5761.6000000000004, 5762.4000000000005};
  for (int i = 0; i < 12; ++i) {
    f.flux.push_back(1.5 * i);
    f.ivar.push_back(0.25 * i);
    f.chi2pix.push_back(1.0 + i);
    f.pixmask_fraction.push_back(0.0);
    f.mask.push_back(i == 5 ? (kSomeBadPix | kBad2DFit) : 0u);
  }
  for (int i = 0; i < 36; ++i) f.rdiags.push_back(0.01 * i);
  return f;
}

// A FIBERMAP with 6 rows (FIBER = 0..5) as FITS bytes.
std::string Fibermap() {
  auto f = FitsFile::CreateMemory("fm");
  EXPECT_TRUE(f.ok());
  int status = 0;
  fits_create_img(f->get(), BYTE_IMG, 0, nullptr, &status);
  char* ttype[] = {const_cast<char*>("FIBER")};
  char* tform[] = {const_cast<char*>("J")};
  fits_create_tbl(f->get(), BINARY_TBL, 6, 1, ttype, tform, nullptr, "FIBERMAP", &status);
  int fibers[6] = {0, 1, 2, 3, 4, 5};
  fits_write_col(f->get(), TINT, 1, 1, 1, 6, fibers, &status);
  EXPECT_EQ(status, 0);
  auto bytes = f->TakeMemory();
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

TEST(FrameWriterTest, DesispecLayoutAndKeywords) {
  Frame frame = SmallFrame();
  FrameMetadata meta;
  meta.image_header = {"CAMERA  = 'r0      '           / Spectrograph Camera",
                       "DEPNAM00= 'python  '", "DEPVER00= '3.11.2  '",
                       "DEPNAM01= 'spexd   '", "DEPVER01= '0.0.1   '"};
  meta.fibermap_fits = Fibermap();
  meta.in_psf = "psf.fits";
  meta.in_img = "preproc.fits";
  meta.wmin = 5760.0; meta.wmax = 5762.4; meta.dw = 0.8;
  auto bytes = FrameToFits(frame, meta);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto f = FitsFile::OpenMemory(bytes->data(), bytes->size(), "frame");
  ASSERT_TRUE(f.ok());
  // HDU order and types of desispec.io.write_frame (spec §5.3).
  const char* names[] = {"FLUX",     "IVAR",    "MASK",  "WAVELENGTH", "RESOLUTION",
                         "FIBERMAP", "CHI2PIX", "SCORES"};
  ASSERT_EQ(*f->NumHdus(), 8);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(f->MoveToHduIndex(i).ok());
    EXPECT_EQ(*f->ReadString("EXTNAME"), names[i]);
    EXPECT_TRUE(f->ReadString("CHECKSUM").ok()) << names[i];
  }
  ASSERT_TRUE(f->MoveToHdu("FLUX").ok());
  EXPECT_EQ(*f->ReadString("BUNIT"), "electron/Angstrom");
  EXPECT_EQ(*f->ReadString("CAMERA"), "r0");
  EXPECT_EQ(*f->ReadLong("NSPEC"), 3);
  EXPECT_EQ(*f->ReadLong("FIBERMIN"), 2);
  EXPECT_EQ(*f->ReadDouble("WAVESTEP"), 0.8);
  EXPECT_EQ(*f->ReadString("IN_PSF"), "psf.fits");
  // desiutil.depend.setdep: the input's entries stay, spexd's version is updated in
  // place, new names take the next free numbers.
  EXPECT_EQ(*f->ReadString("DEPNAM00"), "python");
  EXPECT_EQ(*f->ReadString("DEPVER01"), kSpexdVersion);
  EXPECT_EQ(*f->ReadString("DEPNAM02"), "cfitsio");
  // Then desiutil's environment entries (values or NOT_SET), DESIMODEL last.
  EXPECT_EQ(*f->ReadString("DEPNAM03"), "DESI_ROOT");
  EXPECT_EQ(*f->ReadString("DEPNAM10"), "DESIMODEL");
  EXPECT_FALSE(f->ReadString("DEPNAM11").ok());
  auto info = f->GetImageInfo();
  EXPECT_EQ(info->equiv_bitpix, FLOAT_IMG);
  EXPECT_EQ(info->naxes, (std::vector<long>{4, 3}));
  EXPECT_EQ(*f->ReadImage<double>(), std::vector<double>(frame.flux.begin(), frame.flux.end()));
  ASSERT_TRUE(f->MoveToHdu("MASK").ok());
  EXPECT_EQ(f->GetImageInfo()->equiv_bitpix, ULONG_IMG);  // BITPIX 32 + BZERO 2^31
  EXPECT_EQ(*f->ReadImage<uint32_t>(), frame.mask);
  ASSERT_TRUE(f->MoveToHdu("WAVELENGTH").ok());
  EXPECT_EQ(f->GetImageInfo()->equiv_bitpix, DOUBLE_IMG);
  EXPECT_EQ(*f->ReadImage<double>(), frame.wave);  // float64 kept exactly
  ASSERT_TRUE(f->MoveToHdu("RESOLUTION").ok());
  EXPECT_EQ(f->GetImageInfo()->naxes, (std::vector<long>{4, 3, 3}));
  ASSERT_TRUE(f->MoveToHdu("FIBERMAP").ok());
  long nrows = 0;
  int status = 0, anynul = 0;
  fits_get_num_rows(f->get(), &nrows, &status);
  EXPECT_EQ(nrows, 3);  // fibres 2..4 only
  int fibers[3] = {0, 0, 0};
  fits_read_col(f->get(), TINT, 1, 1, 1, 3, nullptr, fibers, &anynul, &status);
  EXPECT_EQ(fibers[0], 2);
  EXPECT_EQ(fibers[2], 4);
  // SCORES: float64 columns, one row per fibre, desispec's comments (grid in band b).
  ASSERT_TRUE(f->MoveToHdu("SCORES").ok());
  fits_get_num_rows(f->get(), &nrows, &status);
  EXPECT_EQ(nrows, 3);
  EXPECT_EQ(*f->ReadString("TTYPE1"), "SUM_RAW_COUNT_B");
  EXPECT_EQ(*f->ReadString("TFORM1"), "D");
  EXPECT_EQ(*f->ReadString("TTYPE3"), "MEDIAN_RAW_SNR_B");
  char comment[FLEN_COMMENT] = {0};
  char value[FLEN_VALUE] = {0};
  fits_read_keyword(f->get(), "TTYPE2", value, comment, &status);
  EXPECT_STREQ(comment, "median counts/A in wave. range 4000,5800A");
  double sums[3] = {0, 0, 0};
  fits_read_col(f->get(), TDOUBLE, 1, 1, 1, 3, nullptr, sums, &anynul, &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(sums[0], 1.5 * (0 + 1 + 2 + 3));  // fibre 2: flux 1.5 * (0..3), all in band
  EXPECT_EQ(sums[2], 1.5 * (8 + 9 + 10 + 11));
}

int CountContinueCards(FitsFile* f) {
  int nkeys = 0, more = 0, status = 0, n = 0;
  fits_get_hdrspace(f->get(), &nkeys, &more, &status);
  char record[FLEN_CARD];
  for (int i = 1; status == 0 && i <= nkeys; ++i) {
    fits_read_record(f->get(), i, record, &status);
    n += std::string(record).rfind("CONTINUE", 0) == 0;
  }
  EXPECT_EQ(status, 0);
  return n;
}

// A preproc IMAGE header as CFITSIO writes long strings (fits_write_key_longstr: the value
// continued over CONTINUE cards; fits_write_key_longwarn: LONGSTRN), read with
// ReadUserCards: the frame keeps every value whole, and long IN_IMG/IN_PSF paths too.
TEST(FrameWriterTest, LongStringsKeptWhole) {
  std::string long141, long120;
  for (int i = 0; long141.size() < 141; ++i) long141 += static_cast<char>('a' + i % 26);
  for (int i = 0; long120.size() < 120; ++i) long120 += static_cast<char>('0' + i % 10);
  long120[50] = '\'';  // a quote inside (doubled on the card)
  auto in = FitsFile::CreateMemory("preproc");
  ASSERT_TRUE(in.ok());
  int status = 0;
  fits_create_img(in->get(), FLOAT_IMG, 0, nullptr, &status);
  fits_write_key_longwarn(in->get(), &status);
  fits_write_key_str(in->get(), "CAMERA", "r0", "Spectrograph Camera", &status);
  fits_write_key_longstr(in->get(), "LONGKEY", long141.c_str(), "a long value", &status);
  fits_write_key_longstr(in->get(), "DETAIL", long120.c_str(), nullptr, &status);
  ASSERT_EQ(status, 0);
  auto cards = in->ReadUserCards();
  ASSERT_TRUE(cards.ok()) << cards.status();
  const int continues = CountContinueCards(&*in);
  ASSERT_GE(continues, 3);  // the input really uses the convention (2 + 1 cards)
  EXPECT_EQ(*in->ReadString("LONGKEY"), long141);

  Frame frame = SmallFrame();
  FrameMetadata meta;
  meta.image_header = *cards;
  // A path outside $SPECPROD stays as given: 122 characters.
  meta.in_img = "/" + std::string(100, 'd') + "/preproc-r0-00012345.fits";
  meta.in_psf = "/" + std::string(90, 'p') + "/psf.fits";
  ASSERT_GT(meta.in_img.size(), 68u);
  meta.wmin = 5760.0; meta.wmax = 5762.4; meta.dw = 0.8;
  auto bytes = FrameToFits(frame, meta);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto f = FitsFile::OpenMemory(bytes->data(), bytes->size(), "frame");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->MoveToHdu("FLUX").ok());
  EXPECT_EQ(*f->ReadString("LONGKEY"), long141);
  EXPECT_EQ(*f->ReadString("DETAIL"), long120);
  EXPECT_EQ(*f->ReadString("CAMERA"), "r0");
  EXPECT_EQ(*f->ReadString("LONGSTRN"), "OGIP 1.0");
  EXPECT_EQ(*f->ReadString("IN_IMG"), meta.in_img);
  EXPECT_EQ(*f->ReadString("IN_PSF"), meta.in_psf);
  char comment[FLEN_COMMENT] = {0};
  char* value = nullptr;
  fits_read_key_longstr(f->get(), "LONGKEY", &value, comment, &status);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(std::string(value), long141);
  fits_free_memory(value, &status);
  // The comment as the input has it (CFITSIO reads it from the last CONTINUE card).
  char in_comment[FLEN_COMMENT] = {0};
  fits_read_key_longstr(in->get(), "LONGKEY", &value, in_comment, &status);
  fits_free_memory(value, &status);
  EXPECT_STREQ(comment, in_comment);
  EXPECT_NE(std::string(comment).find("a long value"), std::string::npos);
  // Each key once: no CONTINUE card left over or lost (the input's plus IN_IMG's and
  // IN_PSF's, counted as CFITSIO writes those two alone).
  auto scratch = FitsFile::CreateMemory("scratch");
  fits_create_img(scratch->get(), FLOAT_IMG, 0, nullptr, &status);
  fits_write_key_longstr(scratch->get(), "IN_PSF", meta.in_psf.c_str(), "Input spectral PSF",
                         &status);
  fits_write_key_longstr(scratch->get(), "IN_IMG", meta.in_img.c_str(), nullptr, &status);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(CountContinueCards(&*f), continues + CountContinueCards(&*scratch));
}

// Writing a long-string keyword's cards over an earlier value of the same keyword
// replaces the whole of it (no CONTINUE card of the old value stays).
TEST(FrameWriterTest, LongStringCardsReplaceAnEarlierValue) {
  auto f = FitsFile::CreateMemory("cards");
  ASSERT_TRUE(f.ok());
  int status = 0;
  fits_create_img(f->get(), FLOAT_IMG, 0, nullptr, &status);
  fits_write_key_longstr(f->get(), "LONGKEY", std::string(200, 'x').c_str(), nullptr, &status);
  auto src = FitsFile::CreateMemory("src");
  fits_create_img(src->get(), FLOAT_IMG, 0, nullptr, &status);
  fits_write_key_longstr(src->get(), "LONGKEY", std::string(100, 'y').c_str(), nullptr, &status);
  ASSERT_EQ(status, 0);
  ASSERT_TRUE(f->WriteCards(*src->ReadUserCards()).ok());
  EXPECT_EQ(*f->ReadString("LONGKEY"), std::string(100, 'y'));
  EXPECT_EQ(CountContinueCards(&*f), CountContinueCards(&*src));
}

TEST(FrameWriterTest, AtomicWriteLeavesNoPartialFile) {
  std::string dir = testing::MakeTempDir();
  std::string path = dir + "/frame.fits";
  ASSERT_TRUE(WriteFileAtomically(path, std::string(2880, 'a')).ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string(5760, 'b')).ok());  // replaces
  EXPECT_EQ(std::filesystem::file_size(path), 5760u);
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);  // no temporary left behind
  auto st = WriteFileAtomically(dir + "/missing-dir/frame.fits", "x");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing-dir"), std::string::npos);
}

}  // namespace
// The header as desi_extract_spectra writes it: order, the standard COMMENT pair once,
// HELIOCOR, IN_IMG without a comment, FIBERMIN last; no SCORES with scores = false; the
// model HDU named IMAGE.
TEST(FrameWriterTest, DesiExtractSpectraHeaderConventions) {
  Frame frame = SmallFrame();
  frame.model_height = 2;
  frame.model_width = 2;
  frame.model = {1, 2, 3, 4};
  FrameMetadata meta;
  meta.image_header = {
      "COMMENT   FITS (Flexible Image Transport System) format is defined in 'Astronomy",
      "COMMENT   and Astrophysics', volume 376, page 359; bibcode: 2001A&A...376..359H",
      "FLAVOR  = 'science '", "BUNIT   = 'electron'           / Units of IMAGE"};
  meta.in_psf = "/calib/psf.fits";
  meta.in_img = "preproc.fits";
  meta.wmin = 5760.0; meta.wmax = 5762.4; meta.dw = 0.8;
  meta.heliocor = 1.00001878333715;
  meta.scores = false;
  setenv("DESI_SPECTRO_CALIB", "/calib", 1);
  auto bytes = FrameToFits(frame, meta);
  auto model = ModelToFits(frame, meta);
  unsetenv("DESI_SPECTRO_CALIB");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_TRUE(model.ok()) << model.status();
  auto f = FitsFile::OpenMemory(bytes->data(), bytes->size(), "frame");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->NumHdus(), 6);  // no FIBERMAP given, no SCORES (7 with scores)
  EXPECT_FALSE(f->MoveToHdu("SCORES").ok());
  ASSERT_TRUE(f->MoveToHdu("FLUX").ok());
  std::vector<std::string> keys;
  int comments = 0, nkeys = 0, more = 0, status = 0;
  fits_get_hdrspace(f->get(), &nkeys, &more, &status);
  for (int i = 1; i <= nkeys; ++i) {
    char card[FLEN_CARD], name[FLEN_KEYWORD];
    int len = 0;
    fits_read_record(f->get(), i, card, &status);
    fits_get_keyname(card, name, &len, &status);
    if (std::string(name) == "COMMENT") ++comments;
    else if (std::string(name).rfind("DEP", 0) != 0) keys.push_back(name);
  }
  EXPECT_EQ(comments, 2);
  EXPECT_EQ(keys, (std::vector<std::string>{"SIMPLE", "BITPIX", "NAXIS", "NAXIS1", "NAXIS2",
                                            "EXTEND", "EXTNAME", "FLAVOR", "BUNIT", "HELIOCOR",
                                            "NSPEC", "WAVEMIN", "WAVEMAX", "WAVESTEP", "SPECTER",
                                            "IN_PSF", "IN_IMG", "FIBERMIN", "CHECKSUM",
                                            "DATASUM"}));
  EXPECT_EQ(*f->ReadString("BUNIT"), "electron/Angstrom");
  EXPECT_EQ(*f->ReadString("IN_PSF"), "SPCALIB/psf.fits");
  EXPECT_NEAR(*f->ReadDouble("HELIOCOR"), 1.00001878333715, 1e-15);
  char value[FLEN_VALUE], comment[FLEN_COMMENT];
  fits_read_keyword(f->get(), "IN_IMG", value, comment, &status);
  EXPECT_STREQ(comment, "");
  auto m = FitsFile::OpenMemory(model->data(), model->size(), "model");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m->ReadString("EXTNAME"), "IMAGE");
  EXPECT_NEAR(*m->ReadDouble("HELIOCOR"), 1.00001878333715, 1e-15);
}

// FIBERMAP strings: blank padding becomes NUL padding (fitsio then reads 'GAL').
TEST(FrameWriterTest, FibermapStringsNulPadded) {
  auto fm = FitsFile::CreateMemory("fm");
  ASSERT_TRUE(fm.ok());
  int status = 0;
  fits_create_img(fm->get(), BYTE_IMG, 0, nullptr, &status);
  char* ttype[] = {const_cast<char*>("FIBER"), const_cast<char*>("SIMTYPE")};
  char* tform[] = {const_cast<char*>("J"), const_cast<char*>("6A")};
  fits_create_tbl(fm->get(), BINARY_TBL, 5, 2, ttype, tform, nullptr, "FIBERMAP", &status);
  int fibers[5] = {0, 1, 2, 3, 4};
  const char* names[5] = {"GAL", "STAR", "SKY", "QSO", "GAL"};
  fits_write_col(fm->get(), TINT, 1, 1, 1, 5, fibers, &status);
  fits_write_col(fm->get(), TSTRING, 2, 1, 1, 5, const_cast<char**>(names), &status);
  ASSERT_EQ(status, 0);
  Frame frame = SmallFrame();
  FrameMetadata meta;
  meta.fibermap_fits = *fm->TakeMemory();
  auto bytes = FrameToFits(frame, meta);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto f = FitsFile::OpenMemory(bytes->data(), bytes->size(), "frame");
  ASSERT_TRUE(f->MoveToHdu("FIBERMAP").ok());
  unsigned char row[10];
  fits_read_tblbytes(f->get(), 1, 1, 10, row, &status);  // fibre 2: SKY
  ASSERT_EQ(status, 0);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(row + 4), 6), std::string("SKY\0\0\0", 6));
  fits_read_tblbytes(f->get(), 2, 1, 10, row, &status);  // fibre 3: QSO
  EXPECT_EQ(std::string(reinterpret_cast<char*>(row + 4), 6), std::string("QSO\0\0\0", 6));
}

}  // namespace spexd::core
