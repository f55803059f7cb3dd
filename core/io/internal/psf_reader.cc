// Reading a specex PSF file into a Psf, every field checked before it is used: the
// checks of a .fits.gz's headers as it inflates (PsfHduCheck) and the reader of the three
// HDUs (PsfReader).
#include "core/io/internal/psf_reader.h"

#include <fitsio.h>

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/numerics/legendre.h"
#include "core/base/status_macros.h"

namespace spexd::core {

// Limits that reject absurd headers before they turn into huge allocations. The real
// files have HSIZEX/Y 8/5, GHDEG 6, LEGDEG 1..3, 500 fibres, 7 trace coefficients.
namespace {
constexpr long kMaxHalfSize = 64;
constexpr long kMaxGhDeg = 20;
constexpr long kMaxLegDeg = 30;
constexpr long kMaxSpectra = 100000;
constexpr long kMaxTraceCoeffs = 64;
constexpr long kMaxTableRows = 100000;
constexpr long kMaxCcdPixels = 1000000;
// Trace sanity over the domain: DESI traces sit on 4k CCDs and move ~1.7 pixels per A
// in y (b, r, z) and far less in x.
constexpr double kMaxTracePixel = 1e6;
constexpr double kMaxTraceSlope = 100;

std::string AxesShape(const std::vector<int64_t>& axes) {
  std::string dims;
  for (int64_t a : axes) absl::StrAppend(&dims, dims.empty() ? "" : "x", a);
  return dims;
}

std::string PrimaryNotXtrace(const std::vector<int64_t>& axes) {
  return absl::StrCat("the primary HDU holds data (", AxesShape(axes),
                      " in FITS axis order) but is not the XTRACE HDU: a PSF file's primary "
                      "HDU is its XTRACE or holds no data (the HDUs a PSF reader uses are "
                      "XTRACE, YTRACE, PSF)");
}

}  // namespace

// What a PSF reader needs of a .fits.gz's HDUs, judged from each header before its data
// inflate, so that a file that cannot be a PSF costs its headers: the primary HDU is
// XTRACE or holds no data (specex's PSFs have XTRACE first), XTRACE and YTRACE are within
// ReadTrace's bounds, and every other image extension is dropped (the reader moves to
// XTRACE, YTRACE and PSF alone; tables are kept). PsfReader::Read makes the same checks
// on a plain file.

HduHeaderCheck PsfHduCheck() {
  auto seen = std::make_shared<std::array<bool, 3>>();  // the first XTRACE, YTRACE, PSF
  return [seen](const HduHeaderFacts& hdu) -> absl::StatusOr<HduUse> {
    static constexpr const char* kUsed[] = {"XTRACE", "YTRACE", "PSF"};
    if (hdu.index == 0 && hdu.data_bytes > 0 && !hdu.Named("XTRACE")) {
      return absl::InvalidArgumentError(PrimaryNotXtrace(hdu.axes));
    }
    bool used = hdu.index == 0;
    for (int t = 0; t < 3; ++t) {
      if ((*seen)[t] || !hdu.Named(kUsed[t])) continue;
      (*seen)[t] = true;
      used = true;
      if (t < 2 && hdu.image && hdu.axes.size() == 2 &&
          (hdu.axes[0] > kMaxTraceCoeffs || hdu.axes[1] > kMaxSpectra)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "expected a 2-D [nspec][ncoeff] image, got shape (", AxesShape(hdu.axes),
            ") in FITS axis order"));
      }
    }
    return used || hdu.table ? HduUse::kKeep : HduUse::kDrop;
  };
}

// Reads the three HDUs of a specex PSF (extraction-spec §1.1-1.2) into a Psf. A friend of
// Psf so that the validated fields are assigned in one place.
class PsfReader {
 public:
  explicit PsfReader(FitsFile* file) : file_(file) {}
  absl::StatusOr<Psf> Read();

 private:
  // A missing HDU or keyword is a malformed *file* to the caller, so NOT_FOUND from the
  // FITS layer becomes INVALID_ARGUMENT here.
  absl::Status MoveTo(const char* extname);
  absl::StatusOr<long> IntKey(const char* key, long lo, long hi);
  absl::StatusOr<double> DoubleKey(const char* key);
  absl::StatusOr<LegendreTable> ReadTrace(const char* extname, int* nspec);
  absl::Status CheckPsfType(const char* extname, bool* seen);
  // PsfHduCheck's rule for the primary HDU, on a file CFITSIO has open.
  absl::Status CheckPrimary();
  bool HasKey(const char* key);

  // The PSF table (spec §1.2), read in the stages below.
  struct TableDomain {
    double wavemin = 0, wavemax = 0;
    long ncoeff = 0;  // LEGDEG + 1
  };
  struct ParamColumns {
    int param = 0, coeff = 0;  // column numbers
    long nrows = 0, name_width = 0, repeat = 0;
  };
  absl::Status ReadParamTable(Psf* psf);
  absl::StatusOr<TableDomain> ReadTableKeywords(Psf* psf);
  absl::StatusOr<ParamColumns> FindParamColumns(int nspec, long ncoeff);
  absl::StatusOr<std::map<std::string, long>> ReadRowNames(const ParamColumns& cols);
  absl::Status ReadParamRows(const ParamColumns& cols, const std::map<std::string, long>& rows,
                             const TableDomain& domain, Psf* psf);
  absl::Status CheckPsfShape(const Psf& psf);

  FitsFile* file_;
};

absl::Status PsfReader::MoveTo(const char* extname) {
  absl::Status s = file_->MoveToHdu(extname);
  if (absl::IsNotFound(s)) {
    // An HDU is also "missing" when the file was cut before it: say so.
    absl::StatusOr<int> n = file_->NumHdus();
    if (n.ok() && *n > 0 && file_->MoveToHduIndex(*n - 1).ok()) {
      absl::Status complete = file_->CheckHduComplete();
      if (!complete.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(complete.message(), " (HDU '", extname, "' not reached)"));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(file_->name(), ": not a GaussHermite PSF: missing HDU '", extname, "'"));
  }
  return s;
}

absl::StatusOr<long> PsfReader::IntKey(const char* key, long lo, long hi) {
  absl::StatusOr<long> v = file_->ReadLong(key);
  if (absl::IsNotFound(v.status())) return absl::InvalidArgumentError(v.status().message());
  if (!v.ok()) return v.status();
  if (*v < lo || *v > hi) {
    return file_->Invalid(
        absl::StrCat("keyword ", key, " = ", *v, " is outside [", lo, ", ", hi, "]"));
  }
  return *v;
}

absl::StatusOr<double> PsfReader::DoubleKey(const char* key) {
  absl::StatusOr<double> v = file_->ReadDouble(key);
  if (absl::IsNotFound(v.status())) return absl::InvalidArgumentError(v.status().message());
  if (!v.ok()) return v.status();
  if (!std::isfinite(*v)) return file_->Invalid(absl::StrCat("keyword ", key, " is not finite"));
  return *v;
}

bool PsfReader::HasKey(const char* key) {
  char card[FLEN_CARD] = {0};
  int status = 0;
  fits_read_card(file_->get(), key, card, &status);
  if (status != 0) fits_clear_errmsg();
  return status == 0;
}

absl::Status PsfReader::CheckPsfType(const char* extname, bool* seen) {
  SPEXD_RETURN_IF_ERROR(MoveTo(extname));
  std::optional<std::string> type = file_->ReadOptionalString("PSFTYPE");
  if (!type.has_value()) return absl::OkStatus();
  *seen = true;
  std::string t(absl::StripAsciiWhitespace(*type));
  if (t != "GAUSS-HERMITE") {
    return file_->Invalid(
        absl::StrCat("PSFTYPE is '", t, "', only 'GAUSS-HERMITE' is supported"));
  }
  return absl::OkStatus();
}

absl::Status PsfReader::CheckPrimary() {
  int xtrace_hdu = 0, status = 0;
  if (file_->MoveToHdu("XTRACE").ok()) fits_get_hdu_num(file_->get(), &xtrace_hdu);
  if (xtrace_hdu == 1 || xtrace_hdu == 0) return absl::OkStatus();  // no XTRACE: Read says so
  SPEXD_RETURN_IF_ERROR(file_->MoveToHduIndex(0));
  LONGLONG head = 0, data = 0, end = 0;
  fits_get_hduaddrll(file_->get(), &head, &data, &end, &status);
  if (status != 0) return file_->Error(status, "reading the primary HDU's layout");
  if (end <= data) return absl::OkStatus();
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo info, file_->GetImageInfo());
  return file_->Invalid(PrimaryNotXtrace(std::vector<int64_t>(info.naxes.begin(), info.naxes.end())));
}

absl::StatusOr<LegendreTable> PsfReader::ReadTrace(const char* extname, int* nspec) {
  SPEXD_RETURN_IF_ERROR(MoveTo(extname));
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo info, file_->GetImageInfo());
  SPEXD_RETURN_IF_ERROR(file_->CheckHduComplete());
  if (info.naxes.size() != 2 || info.naxes[0] < 1 || info.naxes[0] > kMaxTraceCoeffs ||
      info.naxes[1] < 1 || info.naxes[1] > kMaxSpectra) {
    std::string dims;
    for (long a : info.naxes) absl::StrAppend(&dims, dims.empty() ? "" : "x", a);
    return file_->Invalid(absl::StrCat("expected a 2-D [nspec][ncoeff] image, got shape (",
                                       dims, ") in FITS axis order"));
  }
  LegendreTable t;
  SPEXD_ASSIGN_OR_RETURN(t.wavemin, DoubleKey("WAVEMIN"));
  SPEXD_ASSIGN_OR_RETURN(t.wavemax, DoubleKey("WAVEMAX"));
  if (!(t.wavemax > t.wavemin)) return file_->Invalid("WAVEMAX must be greater than WAVEMIN");
  t.ncoeff = static_cast<int>(info.naxes[0]);
  *nspec = static_cast<int>(info.naxes[1]);
  SPEXD_ASSIGN_OR_RETURN(t.coeff, file_->ReadImage<double>());
  for (std::size_t k = 0; k < t.coeff.size(); ++k) {
    if (!std::isfinite(t.coeff[k])) {
      return file_->Invalid(absl::StrCat("non-finite coefficient for fibre ",
                                         k / static_cast<std::size_t>(t.ncoeff)));
    }
  }
  return t;
}

absl::Status PsfReader::ReadParamTable(Psf* psf) {
  SPEXD_RETURN_IF_ERROR(MoveTo("PSF"));
  int status = 0, hdutype = 0;
  fits_get_hdu_type(file_->get(), &hdutype, &status);
  if (status != 0) return file_->Error(status, "reading HDU type");
  if (hdutype != BINARY_TBL) return file_->Invalid("is not a binary table");
  // CFITSIO may read stale bytes past the end of a cut in-memory file: check first.
  SPEXD_RETURN_IF_ERROR(file_->CheckHduComplete());
  SPEXD_ASSIGN_OR_RETURN(const TableDomain domain, ReadTableKeywords(psf));
  SPEXD_ASSIGN_OR_RETURN(const ParamColumns cols, FindParamColumns(psf->nspec_, domain.ncoeff));
  SPEXD_ASSIGN_OR_RETURN(const auto rows, ReadRowNames(cols));
  SPEXD_RETURN_IF_ERROR(ReadParamRows(cols, rows, domain, psf));
  return CheckPsfShape(*psf);
}

absl::StatusOr<PsfReader::TableDomain> PsfReader::ReadTableKeywords(Psf* psf) {
  SPEXD_ASSIGN_OR_RETURN(long hsizex, IntKey("HSIZEX", 1, kMaxHalfSize));
  SPEXD_ASSIGN_OR_RETURN(long hsizey, IntKey("HSIZEY", 1, kMaxHalfSize));
  SPEXD_ASSIGN_OR_RETURN(long ghdegx, IntKey("GHDEGX", 0, kMaxGhDeg));
  SPEXD_ASSIGN_OR_RETURN(long ghdegy, IntKey("GHDEGY", 0, kMaxGhDeg));
  SPEXD_ASSIGN_OR_RETURN(long legdeg, IntKey("LEGDEG", 0, kMaxLegDeg));
  TableDomain domain;
  SPEXD_ASSIGN_OR_RETURN(domain.wavemin, DoubleKey("WAVEMIN"));
  SPEXD_ASSIGN_OR_RETURN(domain.wavemax, DoubleKey("WAVEMAX"));
  if (!(domain.wavemax > domain.wavemin)) {
    return file_->Invalid("WAVEMAX must be greater than WAVEMIN");
  }
  domain.ncoeff = legdeg + 1;
  psf->hsizex_ = static_cast<int>(hsizex);
  psf->hsizey_ = static_cast<int>(hsizey);
  psf->ghdegx_ = static_cast<int>(ghdegx);
  psf->ghdegy_ = static_cast<int>(ghdegy);
  psf->legdeg_ = static_cast<int>(legdeg);
  // Optional keywords: NPIX_X/Y (CCD size, used by the simulator), PSFERR (spec
  // "Decisions": psferr rule; note the files carry PSFERROR, which is deliberately not
  // read, as in gpu_specter), IN_PSF (provenance).
  for (auto [key, dest] : {std::pair<const char*, int*>{"NPIX_X", &psf->npix_x_},
                           std::pair<const char*, int*>{"NPIX_Y", &psf->npix_y_}}) {
    if (HasKey(key)) {
      SPEXD_ASSIGN_OR_RETURN(long n, IntKey(key, 1, kMaxCcdPixels));
      *dest = static_cast<int>(n);
    }
  }
  if (HasKey("PSFERR")) {
    SPEXD_ASSIGN_OR_RETURN(double e, DoubleKey("PSFERR"));
    if (e < 0) return file_->Invalid("PSFERR is negative");
    psf->psferr_ = e;
  }
  // PSFERROR is not used (above), but a negative model error marks a broken file, which
  // is refused rather than extracted from; DESI's PSFs carry 0.0 (spec §1.2).
  if (HasKey("PSFERROR")) {
    SPEXD_ASSIGN_OR_RETURN(double e, DoubleKey("PSFERROR"));
    if (e < 0) {
      return file_->Invalid(absl::StrCat("PSFERROR = ", e, " is negative (a model error is >= 0)"));
    }
  }
  psf->in_psf_ = file_->ReadOptionalString("IN_PSF");
  return domain;
}

absl::StatusOr<PsfReader::ParamColumns> PsfReader::FindParamColumns(int nspec, long ncoeff) {
  fitsfile* f = file_->get();
  int status = 0;
  ParamColumns c;
  fits_get_colnum(f, CASEINSEN, const_cast<char*>("PARAM"), &c.param, &status);
  if (status != 0) {
    fits_clear_errmsg();
    return file_->Invalid("missing column PARAM");
  }
  fits_get_colnum(f, CASEINSEN, const_cast<char*>("COEFF"), &c.coeff, &status);
  if (status != 0) {
    fits_clear_errmsg();
    return file_->Invalid("missing column COEFF");
  }
  int typecode = 0;
  long repeat = 0, width = 0;
  fits_get_num_rows(f, &c.nrows, &status);
  if (status != 0) return file_->Error(status, "reading the number of rows");
  if (c.nrows < 1 || c.nrows > kMaxTableRows) {
    return file_->Invalid(absl::StrCat("table has ", c.nrows, " rows"));
  }
  fits_get_coltype(f, c.param, &typecode, &repeat, &width, &status);
  if (status != 0) return file_->Error(status, "reading column PARAM type");
  if (typecode != TSTRING || width < 1) return file_->Invalid("column PARAM is not a string");
  c.name_width = width;
  fits_get_coltype(f, c.coeff, &typecode, &repeat, &width, &status);
  if (status != 0) return file_->Error(status, "reading column COEFF type");
  if (typecode == TSTRING || typecode == TLOGICAL || typecode == TBIT) {
    return file_->Invalid("column COEFF is not numeric");
  }
  if (repeat != ncoeff * nspec) {
    return file_->Invalid(absl::StrCat("column COEFF has ", repeat, " values per row, expected (",
                                       "LEGDEG+1) * nspec = ", ncoeff, " * ", nspec,
                                       " (XTRACE rows)"));
  }
  c.repeat = repeat;
  // TDIM, when present, must say (LEGDEG+1, nspec) (FITS order, spec §1.2).
  int naxis = 0;
  long naxes[2] = {0, 0};
  fits_read_tdim(f, c.coeff, 2, &naxis, naxes, &status);
  if (status != 0) return file_->Error(status, "reading TDIM of column COEFF");
  if (naxis == 2 && (naxes[0] != ncoeff || naxes[1] != nspec)) {
    return file_->Invalid(absl::StrCat("column COEFF has TDIM (", naxes[0], ", ", naxes[1],
                                       "), expected (", ncoeff, ", ", nspec, ")"));
  }
  return c;
}

absl::StatusOr<std::map<std::string, long>> PsfReader::ReadRowNames(const ParamColumns& cols) {
  // Name -> row map (spec §1.2: row order is not to be relied upon).
  std::map<std::string, long> rows;
  std::vector<char> buf(static_cast<std::size_t>(cols.name_width) + 1);
  int status = 0;
  for (long r = 1; r <= cols.nrows; ++r) {
    char* p = buf.data();
    int anynul = 0;
    fits_read_col_str(file_->get(), cols.param, r, 1, 1, nullptr, &p, &anynul, &status);
    if (status != 0) return file_->Error(status, "reading column PARAM (truncated file?)");
    std::string name(absl::StripAsciiWhitespace(absl::string_view(p)));
    if (!rows.emplace(name, r).second) {
      return file_->Invalid(absl::StrCat("parameter '", name, "' appears twice"));
    }
  }
  return rows;
}

absl::Status PsfReader::ReadParamRows(const ParamColumns& cols,
                                      const std::map<std::string, long>& rows,
                                      const TableDomain& domain, Psf* psf) {
  const int ngh = (psf->ghdegx_ + 1) * (psf->ghdegy_ + 1);
  psf->params_.assign(static_cast<std::size_t>(2 + ngh), LegendreTable{});
  for (int p = 0; p < 2 + ngh; ++p) {
    std::string name;
    if (p == Psf::kGhSigX) {
      name = "GHSIGX";
    } else if (p == Psf::kGhSigY) {
      name = "GHSIGY";
    } else {
      const int k = p - 2;
      name = absl::StrCat("GH-", k % (psf->ghdegx_ + 1), "-", k / (psf->ghdegx_ + 1));
    }
    auto it = rows.find(name);
    if (it == rows.end()) {
      return file_->Invalid(absl::StrCat("missing parameter row '", name, "' (GHDEGX ",
                                         psf->ghdegx_, ", GHDEGY ", psf->ghdegy_, ")"));
    }
    LegendreTable& t = psf->params_[static_cast<std::size_t>(p)];
    t.wavemin = domain.wavemin;
    t.wavemax = domain.wavemax;
    t.ncoeff = static_cast<int>(domain.ncoeff);
    t.coeff.resize(static_cast<std::size_t>(cols.repeat));
    int anynul = 0, status = 0;
    double nulval = 0;
    // FITS TDIM (ncoeff, nspec) is Fortran order, so the flat row is already
    // [nspec][ncoeff] in C order (spec §1.2).
    fits_read_col(file_->get(), TDOUBLE, cols.coeff, it->second, 1, cols.repeat, &nulval,
                  t.coeff.data(), &anynul, &status);
    if (status != 0) {
      return file_->Error(status, absl::StrCat("reading COEFF of '", name, "' (truncated file?)"));
    }
    for (std::size_t k = 0; k < t.coeff.size(); ++k) {
      if (!std::isfinite(t.coeff[k])) {
        return file_->Invalid(absl::StrCat("non-finite COEFF in parameter '", name, "' for fibre ",
                                           k / static_cast<std::size_t>(domain.ncoeff)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status PsfReader::CheckPsfShape(const Psf& psf) {
  // Every fibre's Legendre expansions, sampled densely over their whole domain: a
  // polynomial of degree <= kMaxLegDeg can dip between a few check points (a
  // sigma negative or 1e-300 between the ends and the middle loaded fine and
  // extracted to zeros).
  constexpr int kSamples = 1024;
  for (int fiber = 0; fiber < psf.nspec_; ++fiber) {
    for (int p : {Psf::kGhSigX, Psf::kGhSigY}) {
      const LegendreTable& t = psf.params_[static_cast<std::size_t>(p)];
      for (int k = 0; k <= kSamples; ++k) {
        const double w = t.wavemin + (t.wavemax - t.wavemin) * k / kSamples;
        const double sigma = psf.Param(p, fiber, w);
        if (absl::Status s = CheckSigma(p, sigma, fiber, w); !s.ok()) {
          return file_->Invalid(std::string(s.message()));
        }
      }
    }
    // Trace: finite, on a plausible CCD, and with a plausible dispersion.
    double prev_x = 0, prev_y = 0, prev_w = 0;
    for (int k = 0; k <= kSamples; ++k) {
      const double w = psf.ytrace_.wavemin + (psf.ytrace_.wavemax - psf.ytrace_.wavemin) * k / kSamples;
      const double x = psf.X(fiber, w), y = psf.Y(fiber, w);
      if (!(std::fabs(x) <= kMaxTracePixel && std::fabs(y) <= kMaxTracePixel)) {
        return file_->Invalid(absl::StrCat("trace of fibre ", fiber, " is (", x, ", ", y,
                                           ") at ", w, " A, not on a CCD"));
      }
      if (k > 0) {
        const double dxdw = (x - prev_x) / (w - prev_w), dydw = (y - prev_y) / (w - prev_w);
        if (!(std::fabs(dxdw) <= kMaxTraceSlope && std::fabs(dydw) <= kMaxTraceSlope)) {
          return file_->Invalid(absl::StrCat("trace of fibre ", fiber, " moves by (", dxdw, ", ",
                                             dydw, ") pixels per A near ", w,
                                             " A, over the plausible ", kMaxTraceSlope));
        }
      }
      prev_x = x;
      prev_y = y;
      prev_w = w;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Psf> PsfReader::Read() {
  Psf psf;
  psf.source_name_ = file_->name();
  SPEXD_RETURN_IF_ERROR(CheckPrimary());
  // PSFTYPE sits in XTRACE (and the PSF table header); every copy present must agree.
  bool seen = false;
  SPEXD_RETURN_IF_ERROR(CheckPsfType("XTRACE", &seen));
  SPEXD_RETURN_IF_ERROR(CheckPsfType("PSF", &seen));
  if (!seen) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_->name(), ": missing keyword PSFTYPE in XTRACE and PSF headers"));
  }
  int nx = 0, ny = 0;
  SPEXD_ASSIGN_OR_RETURN(psf.xtrace_, ReadTrace("XTRACE", &nx));
  SPEXD_ASSIGN_OR_RETURN(psf.ytrace_, ReadTrace("YTRACE", &ny));
  if (nx != ny || psf.xtrace_.ncoeff != psf.ytrace_.ncoeff) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_->name(), ": XTRACE is [", nx, "][", psf.xtrace_.ncoeff, "] but YTRACE is [", ny,
        "][", psf.ytrace_.ncoeff, "]"));
  }
  psf.nspec_ = nx;
  SPEXD_RETURN_IF_ERROR(ReadParamTable(&psf));
  return psf;
}

absl::StatusOr<Psf> ReadPsf(FitsFile* file) { return PsfReader(file).Read(); }

}  // namespace spexd::core
