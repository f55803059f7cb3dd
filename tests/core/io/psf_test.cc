#include "core/io/psf.h"

#include <fitsio.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/io/fits_file.h"
#include "core/numerics/legendre.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using testing::ReadBytes;

namespace fs = std::filesystem;

// The float64 evaluation reference of gpu_specter's CPU path (shared/data/README.md).
struct EvalReference {
  std::vector<double> wave;
  std::vector<int32_t> fiber;
  std::vector<double> x, y, sigx, sigy, gh, spots;
  std::vector<int32_t> xc, yc;
};

EvalReference LoadEvalReference() {
  EvalReference ref;
  auto file = FitsFile::OpenRead(testing::TestDataPath("psf-eval-00051060.fits.gz"));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return ref;
  auto read_d = [&](const char* name, std::vector<double>* out) {
    ASSERT_TRUE(file->MoveToHdu(name).ok()) << name;
    auto v = file->ReadImage<double>();
    ASSERT_TRUE(v.ok()) << v.status();
    *out = *v;
  };
  auto read_i = [&](const char* name, std::vector<int32_t>* out) {
    ASSERT_TRUE(file->MoveToHdu(name).ok()) << name;
    auto v = file->ReadImage<int32_t>();
    ASSERT_TRUE(v.ok()) << v.status();
    *out = *v;
  };
  read_d("WAVELENGTH", &ref.wave);
  read_i("FIBER", &ref.fiber);
  read_d("X", &ref.x);
  read_d("Y", &ref.y);
  read_d("GHSIGX", &ref.sigx);
  read_d("GHSIGY", &ref.sigy);
  read_d("GH", &ref.gh);
  return ref;
}

double RelErr(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), std::numeric_limits<double>::min());
}

TEST(PsfTest, LoadsBundledPsfHeader) {
  auto psf = Psf::Load(testing::BundledPsfPath());
  ASSERT_TRUE(psf.ok()) << psf.status();
  EXPECT_EQ(psf->nspec(), 500);
  EXPECT_EQ(psf->hsizex(), 8);
  EXPECT_EQ(psf->hsizey(), 5);
  EXPECT_EQ(psf->ghdegx(), 6);
  EXPECT_EQ(psf->ghdegy(), 6);
  EXPECT_EQ(psf->legdeg(), 3);
  EXPECT_EQ(psf->npix_x(), 4114);
  EXPECT_EQ(psf->npix_y(), 4128);
  EXPECT_EQ(psf->wavemin(), 5543.0);
  EXPECT_EQ(psf->wavemax(), 7827.0);
  // The trace domain differs from the PSF-table domain (extraction-spec §1.1 note).
  EXPECT_EQ(psf->xtrace().wavemax, 7826.0);
  EXPECT_EQ(psf->ytrace().wavemin, 5543.0);
  EXPECT_EQ(psf->xtrace().ncoeff, 7);
  EXPECT_EQ(psf->num_params(), 2 + 49);
  // The file has PSFERROR, not PSFERR (spec §1.2).
  EXPECT_FALSE(psf->psferr().has_value());
  EXPECT_GT(psf->MemoryBytes(), 500u * 51 * 4 * sizeof(double));
  EXPECT_EQ(psf->source_name(), testing::BundledPsfPath());
}

TEST(PsfTest, LegendreHelpersMatchClosedForms) {
  const double c[4] = {0.5, -1.25, 2.0, 0.75};
  for (double u : {-1.3, -1.0, -0.2, 0.0, 0.37, 1.0, 1.1}) {
    const double p2 = 0.5 * (3 * u * u - 1), p3 = 0.5 * (5 * u * u * u - 3 * u);
    EXPECT_NEAR(LegendreClenshaw(c, 4, u), 0.5 - 1.25 * u + 2.0 * p2 + 0.75 * p3, 1e-14);
    double v[4];
    LegendreVander(u, 3, v);
    EXPECT_EQ(v[0], 1.0);
    EXPECT_EQ(v[1], u);
    EXPECT_NEAR(v[2], p2, 1e-15);
    EXPECT_NEAR(v[3], p3, 1e-15);
  }
  EXPECT_EQ(LegendreClenshaw(c, 1, 0.3), 0.5);
  EXPECT_EQ(LegendreClenshaw(c, 2, 0.5), 0.5 - 1.25 * 0.5);
  EXPECT_EQ(ReducedWavelength(5543.0, 5543.0, 7827.0), -1.0);
  EXPECT_EQ(ReducedWavelength(7827.0, 5543.0, 7827.0), 1.0);
}

TEST(PsfTest, MatchesGpuSpecterEvaluation) {
  auto psf = Psf::Load(testing::BundledPsfPath());
  ASSERT_TRUE(psf.ok()) << psf.status();
  const EvalReference ref = LoadEvalReference();
  ASSERT_EQ(ref.wave.size(), 9u);
  ASSERT_EQ(ref.fiber.size(), 7u);
  const std::size_t nw = ref.wave.size();
  double max_xy = 0, max_par = 0;
  for (std::size_t f = 0; f < ref.fiber.size(); ++f) {
    const int fib = ref.fiber[f];
    for (std::size_t w = 0; w < nw; ++w) {
      const double wave = ref.wave[w];
      const std::size_t fw = f * nw + w;
      max_xy = std::max(max_xy, RelErr(psf->X(fib, wave), ref.x[fw]));
      max_xy = std::max(max_xy, RelErr(psf->Y(fib, wave), ref.y[fw]));
      max_par = std::max(max_par, RelErr(psf->Param(Psf::kGhSigX, fib, wave), ref.sigx[fw]));
      max_par = std::max(max_par, RelErr(psf->Param(Psf::kGhSigY, fib, wave), ref.sigy[fw]));
      for (int i = 0; i <= 6; ++i) {
        for (int j = 0; j <= 6; ++j) {
          const double want = ref.gh[(fw * 7 + static_cast<std::size_t>(i)) * 7 +
                                     static_cast<std::size_t>(j)];
          const double got = psf->Param(psf->GhIndex(i, j), fib, wave);
          max_par = std::max(max_par, RelErr(got, want));
        }
      }
    }
  }
  RecordProperty("max_rel_err_xy", absl::StrFormat("%.3g", max_xy));
  RecordProperty("max_rel_err_params", absl::StrFormat("%.3g", max_par));
  EXPECT_LE(max_xy, 1e-13);
  EXPECT_LE(max_par, 1e-13);
}

TEST(PsfTest, LoadFromMemoryEqualsLoad) {
  const std::string bytes = ReadBytes(testing::BundledPsfPath());
  auto a = Psf::Load(testing::BundledPsfPath());
  auto b = Psf::LoadFromMemory(bytes.data(), bytes.size(), "upload.fits");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->source_name(), "upload.fits");
  EXPECT_EQ(a->xtrace().coeff, b->xtrace().coeff);
  for (int p = 0; p < a->num_params(); ++p) {
    EXPECT_EQ(a->param_table(p).coeff, b->param_table(p).coeff);
  }
}

// ---- Malformed inputs: each made here by damaging a copy of the bundled PSF. ----

class BadPsfTest : public ::testing::Test {
 protected:
  // Copies the good PSF to <tmp>/<name>, applies `edit` through CFITSIO, returns the path.
  std::string Damaged(const std::string& name, const std::function<void(fitsfile*)>& edit) {
    const std::string path = dir_ + "/" + name;
    fs::copy_file(testing::BundledPsfPath(), path, fs::copy_options::overwrite_existing);
    fitsfile* f = nullptr;
    int status = 0;
    fits_open_diskfile(&f, path.c_str(), READWRITE, &status);
    EXPECT_EQ(status, 0);
    edit(f);
    fits_close_file(f, &status);
    EXPECT_EQ(status, 0) << name;
    return path;
  }
  static void MoveTo(fitsfile* f, const char* extname) {
    int status = 0;
    fits_movnam_hdu(f, ANY_HDU, const_cast<char*>(extname), 0, &status);
    ASSERT_EQ(status, 0) << extname;
  }
  static long ParamRow(fitsfile* f, const std::string& want) {
    MoveTo(f, "PSF");
    int status = 0;
    long nrows = 0;
    fits_get_num_rows(f, &nrows, &status);
    for (long r = 1; r <= nrows; ++r) {
      char buf[16] = {0};
      char* p = buf;
      fits_read_col_str(f, 1, r, 1, 1, nullptr, &p, nullptr, &status);
      std::string s(buf);
      s.erase(s.find_last_not_of(' ') + 1);
      if (s == want) return r;
    }
    return -1;
  }
  static void ExpectInvalid(const absl::StatusOr<Psf>& psf, const std::string& file,
                            const std::string& substring) {
    ASSERT_FALSE(psf.ok()) << "expected an error mentioning: " << substring;
    EXPECT_EQ(psf.status().code(), absl::StatusCode::kInvalidArgument) << psf.status();
    EXPECT_NE(psf.status().message().find(file), std::string::npos) << psf.status();
    EXPECT_NE(psf.status().message().find(substring), std::string::npos) << psf.status();
  }

  std::string dir_ = testing::MakeTempDir();
};

TEST_F(BadPsfTest, MissingHdu) {
  for (const char* hdu : {"YTRACE", "PSF"}) {
    const std::string name = std::string("no-") + hdu + ".fits";
    auto path = Damaged(name, [&](fitsfile* f) {
      MoveTo(f, hdu);
      int status = 0;
      fits_delete_hdu(f, nullptr, &status);
      EXPECT_EQ(status, 0);
    });
    ExpectInvalid(Psf::Load(path), name, std::string("missing HDU '") + hdu + "'");
  }
}

TEST_F(BadPsfTest, WrongPsfType) {
  auto path = Damaged("spotgrid.fits", [](fitsfile* f) {
    MoveTo(f, "XTRACE");
    int status = 0;
    fits_update_key_str(f, "PSFTYPE", "SPOTGRID", nullptr, &status);
  });
  ExpectInvalid(Psf::Load(path), "spotgrid.fits", "PSFTYPE is 'SPOTGRID'");

  auto none = Damaged("notype.fits", [](fitsfile* f) {
    int status = 0;
    for (const char* hdu : {"XTRACE", "PSF"}) {
      MoveTo(f, hdu);
      fits_delete_key(f, "PSFTYPE", &status);
    }
  });
  ExpectInvalid(Psf::Load(none), "notype.fits", "missing keyword PSFTYPE");
}

TEST_F(BadPsfTest, NonFiniteCoefficients) {
  auto path = Damaged("nan-gh.fits", [](fitsfile* f) {
    const long row = ParamRow(f, "GH-2-3");
    ASSERT_GT(row, 0);
    double nan = std::numeric_limits<double>::quiet_NaN();
    int status = 0;
    fits_write_col(f, TDOUBLE, 2, row, 4 * 17 + 2, 1, &nan, &status);  // fibre 17
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(path), "nan-gh.fits", "non-finite COEFF in parameter 'GH-2-3' for fibre 17");

  auto trace = Damaged("inf-trace.fits", [](fitsfile* f) {
    MoveTo(f, "YTRACE");
    double inf = std::numeric_limits<double>::infinity();
    int status = 0;
    fits_write_img(f, TDOUBLE, 7 * 42 + 3 + 1, 1, &inf, &status);  // fibre 42
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(trace), "inf-trace.fits", "non-finite coefficient for fibre 42");
}

TEST_F(BadPsfTest, NonPositiveSigma) {
  auto path = Damaged("negsig.fits", [](fitsfile* f) {
    const long row = ParamRow(f, "GHSIGX");
    ASSERT_GT(row, 0);
    double c0 = -2.0;
    int status = 0;
    fits_write_col(f, TDOUBLE, 2, row, 4 * 5 + 1, 1, &c0, &status);  // fibre 5, L_0
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(path), "negsig.fits", "is not positive for fibre 5");
}

// Sigmas that are fine at both domain ends and the middle (the three points the loader
// used to check) but not in between: loaded, then extracted to zeros.
TEST_F(BadPsfTest, SigmaCheckedOverTheWholeDomain) {
  // In the Legendre basis of the reduced wavelength u: (u - 0.5)^2 + d
  // = (1/3 + 0.25 + d) P0 - P1 + (2/3) P2, equal to 0.25 + d at u = 0 and 1, 2.25 + d at -1.
  auto write_sigma = [&](const std::string& name, const char* param, double d) {
    return Damaged(name, [&](fitsfile* f) {
      const long row = ParamRow(f, param);
      ASSERT_GT(row, 0);
      double c[4] = {1.0 / 3 + 0.25 + d, -1.0, 2.0 / 3, 0.0};
      int status = 0;
      fits_write_col(f, TDOUBLE, 2, row, 4 * 7 + 1, 4, c, &status);  // fibre 7
      EXPECT_EQ(status, 0);
    });
  };
  // The first sample below the 0.01-pixel floor is reported, before the zero crossing.
  ExpectInvalid(Psf::Load(write_sigma("dip.fits", "GHSIGY", -0.01)), "dip.fits",
                "GHSIGY = ");
  ExpectInvalid(Psf::Load(write_sigma("dip.fits", "GHSIGY", -0.01)), "dip.fits",
                "for fibre 7 at");
  ExpectInvalid(Psf::Load(write_sigma("tiny.fits", "GHSIGX", 1e-300)), "tiny.fits",
                "for fibre 7 at");
  // A well-behaved parabola (minimum 0.5 px) still loads.
  EXPECT_TRUE(Psf::Load(write_sigma("fine.fits", "GHSIGX", 0.5)).ok());
}

// A trace that runs off any CCD or jumps between samples is refused at load time.
TEST_F(BadPsfTest, TraceCheckedOverTheWholeDomain) {
  auto path = Damaged("wild-trace.fits", [](fitsfile* f) {
    MoveTo(f, "YTRACE");
    double c = 1e5;  // P6 coefficient of fibre 3: swings by 1e5 pixels across the domain
    int status = 0;
    fits_write_img(f, TDOUBLE, 7 * 3 + 6 + 1, 1, &c, &status);
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(path), "wild-trace.fits", "trace of fibre 3");
}

TEST_F(BadPsfTest, InconsistentShapes) {
  auto ytrace = Damaged("ytrace-499.fits", [](fitsfile* f) {
    MoveTo(f, "YTRACE");
    long naxes[2] = {7, 499};
    int status = 0;
    fits_resize_img(f, DOUBLE_IMG, 2, naxes, &status);
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(ytrace), "ytrace-499.fits", "XTRACE is [500][7] but YTRACE is [499][7]");

  auto both = Damaged("trace-499.fits", [](fitsfile* f) {
    long naxes[2] = {7, 499};
    int status = 0;
    for (const char* hdu : {"XTRACE", "YTRACE"}) {
      MoveTo(f, hdu);
      fits_resize_img(f, DOUBLE_IMG, 2, naxes, &status);
    }
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(both), "trace-499.fits",
                "column COEFF has 2000 values per row, expected (LEGDEG+1) * nspec = 4 * 499");

  auto legdeg = Damaged("legdeg2.fits", [](fitsfile* f) {
    MoveTo(f, "PSF");
    int status = 0;
    fits_update_key_lng(f, "LEGDEG", 2, nullptr, &status);
  });
  ExpectInvalid(Psf::Load(legdeg), "legdeg2.fits", "expected (LEGDEG+1) * nspec = 3 * 500");

  auto oned = Damaged("xtrace-1d.fits", [](fitsfile* f) {
    MoveTo(f, "XTRACE");
    long naxes[1] = {3500};
    int status = 0;
    fits_resize_img(f, DOUBLE_IMG, 1, naxes, &status);
  });
  ExpectInvalid(Psf::Load(oned), "xtrace-1d.fits", "expected a 2-D [nspec][ncoeff] image");
}

TEST_F(BadPsfTest, MissingParameterRowsAndKeywords) {
  auto row = Damaged("no-gh34.fits", [](fitsfile* f) {
    const long r = ParamRow(f, "GH-3-4");
    ASSERT_GT(r, 0);
    const char* renamed = "XX-3-4";
    int status = 0;
    fits_write_col_str(f, 1, r, 1, 1, const_cast<char**>(&renamed), &status);
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(row), "no-gh34.fits", "missing parameter row 'GH-3-4'");

  auto sig = Damaged("no-sigy.fits", [](fitsfile* f) {
    const long r = ParamRow(f, "GHSIGY");
    ASSERT_GT(r, 0);
    int status = 0;
    fits_delete_rows(f, r, 1, &status);
    EXPECT_EQ(status, 0);
  });
  ExpectInvalid(Psf::Load(sig), "no-sigy.fits", "missing parameter row 'GHSIGY'");

  auto deg = Damaged("ghdeg7.fits", [](fitsfile* f) {
    MoveTo(f, "PSF");
    int status = 0;
    fits_update_key_lng(f, "GHDEGX", 7, nullptr, &status);
  });
  ExpectInvalid(Psf::Load(deg), "ghdeg7.fits", "missing parameter row 'GH-7-0'");

  for (const char* key : {"HSIZEX", "LEGDEG", "WAVEMAX"}) {
    const std::string name = std::string("no-") + key + ".fits";
    auto path = Damaged(name, [&](fitsfile* f) {
      MoveTo(f, "PSF");
      int status = 0;
      fits_delete_key(f, key, &status);
      EXPECT_EQ(status, 0);
    });
    ExpectInvalid(Psf::Load(path), name, std::string("missing keyword ") + key);
  }
  auto trace_key = Damaged("no-trace-wavemin.fits", [](fitsfile* f) {
    MoveTo(f, "YTRACE");
    int status = 0;
    fits_delete_key(f, "WAVEMIN", &status);
  });
  ExpectInvalid(Psf::Load(trace_key), "no-trace-wavemin.fits", "missing keyword WAVEMIN");

  auto hsize = Damaged("hsize0.fits", [](fitsfile* f) {
    MoveTo(f, "PSF");
    int status = 0;
    fits_update_key_lng(f, "HSIZEY", 0, nullptr, &status);
  });
  ExpectInvalid(Psf::Load(hsize), "hsize0.fits", "HSIZEY = 0 is outside");
}

TEST_F(BadPsfTest, TruncatedAndGarbageBytes) {
  const std::string good = ReadBytes(testing::BundledPsfPath());
  ASSERT_EQ(good.size(), 1025280u);
  // Cut inside: the primary header, the XTRACE data, the YTRACE data, the PSF table data.
  for (std::size_t cut : {std::size_t{2000}, std::size_t{20000}, std::size_t{40000},
                          good.size() - 5000}) {
    const std::string name = "cut-" + std::to_string(cut) + ".fits";
    SCOPED_TRACE(name);
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary).write(good.data(), static_cast<std::streamsize>(cut));
    {
      SCOPED_TRACE("from disk");
      ExpectInvalid(Psf::Load(path), name, cut < 2880 ? "" : "truncated");
    }
    {
      SCOPED_TRACE("from memory");
      ExpectInvalid(Psf::LoadFromMemory(good.data(), cut, "mem-" + name), "mem-" + name,
                    cut < 2880 ? "" : "truncated");
    }
  }
  std::string garbage;
  for (int i = 0; i < 400; ++i) garbage += "this is not a FITS file. ";
  const std::string path = dir_ + "/garbage.fits";
  std::ofstream(path, std::ios::binary) << garbage;
  ExpectInvalid(Psf::Load(path), "garbage.fits", "cannot open as FITS");
  ExpectInvalid(Psf::LoadFromMemory(garbage.data(), garbage.size(), "garbage-upload"),
                "garbage-upload", "");
  ExpectInvalid(Psf::Load(dir_ + "/absent.fits"), "absent.fits", "");
}

TEST_F(BadPsfTest, NotAPsfFits) {
  // A valid FITS file that is not a PSF (a preproc-like image only).
  const std::string path = dir_ + "/image.fits";
  {
    auto f = FitsFile::Create(path);
    ASSERT_TRUE(f.ok());
    std::vector<float> img(12, 1.0f);
    ASSERT_TRUE(f->WriteImage<float>("IMAGE", {4, 3}, img.data()).ok());
    ASSERT_TRUE(f->Close().ok());
  }
  ExpectInvalid(Psf::Load(path), "image.fits", "missing HDU 'XTRACE'");
}

}  // namespace
}  // namespace spexd::core
