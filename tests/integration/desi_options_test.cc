// desi_extract_spectra's -f/--fibermap and --barycentric-correction through the service,
// on a streamed ExtractFrame (the client writes the frame): a fibermap without a row for
// every fibre, or whose FIBERMAP HDU is no table, and header values no observation can
// have, are refused with INVALID_ARGUMENT as spexctl --local and server-written frames
// refuse them, and the server serves on.
#include <fitsio.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/fits_file.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// A fibermap file: an empty primary, then FIBERMAP as a binary table of `rows` rows
// (FIBER = row) or, with `image`, as an image HDU; `cards` go into FIBERMAP's header.
std::string Fibermap(int rows, bool image, const std::vector<std::string>& cards = {}) {
  auto f = core::FitsFile::CreateMemory("fibermap.fits");
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return "";
  int status = 0;
  fits_create_img(f->get(), BYTE_IMG, 0, nullptr, &status);
  if (image) {
    long naxes[1] = {std::max(rows, 1)};
    fits_create_img(f->get(), FLOAT_IMG, 1, naxes, &status);
    fits_update_key(f->get(), TSTRING, "EXTNAME", const_cast<char*>("FIBERMAP"), nullptr, &status);
  } else {
    char* ttype[] = {const_cast<char*>("FIBER")};
    char* tform[] = {const_cast<char*>("J")};
    fits_create_tbl(f->get(), BINARY_TBL, rows, 1, ttype, tform, nullptr, "FIBERMAP", &status);
    for (int r = 0; r < rows; ++r) {
      int fiber = r;
      fits_write_col(f->get(), TINT, 1, r + 1, 1, 1, &fiber, &status);
    }
  }
  for (const std::string& card : cards) {
    fits_write_record(f->get(), card.c_str(), &status);
  }
  EXPECT_EQ(status, 0);
  auto bytes = f->TakeMemory();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

class DesiOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(TestServerOptions());
    ASSERT_NE(server_, nullptr);
    client::ClientOptions once;
    once.max_attempts = 1;
    client_ = Connect(*server_, once);
    auto psf = client_->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
  }

  // The small extraction, uploaded and streamed back, with `fibermap` as -f.
  absl::Status Streamed(const std::string& fibermap, bool barycentric) {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_fibermap_fits(fibermap);
    h.mutable_params()->set_barycentric_correction(barycentric);
    return RemoteExtractFrame(*client_, h, &Inputs().frame_bytes).status();
  }

  std::unique_ptr<server::SpexdServer> server_;
  std::unique_ptr<client::SpexdClient> client_;
  std::string psf_id_;
};

TEST_F(DesiOptionsTest, AFibermapWithoutARowPerFibreOrNotATableIsRefused) {
  const int fibres = SmallParams().specmin + SmallParams().nspec;
  for (const auto& [what, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"10 rows", Fibermap(10, false)},
           {"0 rows", Fibermap(0, false)},
           {"one row short", Fibermap(fibres - 1, false)},
           {"an image HDU named FIBERMAP", Fibermap(fibres, true)}}) {
    SCOPED_TRACE(what);
    const absl::Status st = Streamed(bytes, false);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("FIBERMAP"), absl::string_view::npos) << st;
  }
  // A row for every fibre is taken, and the server serves on.
  const absl::Status st = Streamed(Fibermap(fibres, false), false);
  EXPECT_TRUE(st.ok()) << st;
}

// The test frame's image header has no RA: the fibermap's header is used (as desispec).
TEST_F(DesiOptionsTest, BarycentricKeysOutOfRangeOrNotDecimalAreRefused) {
  const int fibres = SmallParams().specmin + SmallParams().nspec;
  auto with = [&](const std::string& key, const std::string& value) {
    std::vector<std::string> cards = {"RA      = 150.1", "DEC     = 2.2", "MJD-OBS = 59620.3",
                                      "EXPTIME = 900.0"};
    for (std::string& c : cards) {
      if (c.compare(0, key.size(), key) == 0) c = absl::StrCat(c.substr(0, 10), value);
    }
    return Fibermap(fibres, false, cards);
  };
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"DEC", "95"}, {"RA", "1E300"}, {"DEC", "-1E300"}, {"MJD-OBS", "-1E9"},
           {"MJD-OBS", "1E15"}, {"MJD-OBS", "1E300"}, {"EXPTIME", "-1E12"}, {"RA", "0x96"}}) {
    SCOPED_TRACE(absl::StrCat(key, " = ", value));
    const absl::Status st = Streamed(with(key, value), true);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(key), absl::string_view::npos) << st;
  }
  const absl::Status st = Streamed(with("RA", "150.1"), true);
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace spexd::testing
