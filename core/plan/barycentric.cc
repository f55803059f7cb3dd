#include "core/plan/barycentric.h"

#include <erfa.h>
#include <fitsio.h>

#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/error_text.h"
#include "core/base/status_macros.h"
#include "core/io/fits_file.h"
#include "core/plan/internal/wavelength_grid.h"

namespace spexd::core {
namespace {

constexpr double kMjdZero = 2400000.5;       // JD of MJD 0
constexpr double kC = 299792458.0;            // m/s
constexpr double kAu = 149597870700.0;        // m
constexpr double kDay = 86400.0;              // s
constexpr double kDeg = 3.14159265358979323846 / 180.0;
// Kitt Peak as desispec.heliocentric places it.
constexpr double kLatDeg = 31.96403, kLonDeg = -111.59989, kHeight = 2097.0;
// Earth rotation rate as astropy uses it (coordinates/earth.py OMEGA_EARTH) [rad/s].
constexpr double kOmegaEarth = 1.00273781191135448 * 2.0 * 3.14159265358979323846 / kDay;
// GM [m^3/s^2] of the bodies of astropy's EarthLocation.gravitational_redshift (IAU 2015
// nominal values; the Moon as G * 7.34767309e22 kg with CODATA 2018 G).
constexpr double kGmSun = 1.3271244e20, kGmJupiter = 1.2668653e17;
constexpr double kGmMoon = 6.6743e-11 * 7.34767309e22, kGmEarth = 3.986004e14;

double Norm(const double v[3]) { return std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]); }
double Distance(const double a[3], const double b[3]) {
  const double d[3] = {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
  return Norm(d);
}

// Accepted ranges of the keys (refused outside, never extrapolated into a plausible
// HELIOCOR): RA in [0, 360) and DEC in [-90, 90] degrees, as ICRS coordinates are; MJD in
// [kMjdMin, kMjdMax], from 1960-01-01, where UTC and ERFA's leap-second table begin, to
// 2100-01-01, the end of the span over which eraEpv00's Earth ephemeris is valid; EXPTIME
// in [0, kMaxExptime] seconds: a duration, and no exposure lasts longer than a day (the
// time used is MJD + EXPTIME / 2).
constexpr double kMjdMin = 36934.0, kMjdMax = 88069.0;
constexpr double kMaxExptime = 86400.0;

// Whether `text` is a FITS decimal number (the standard's integer or real, with an E or D
// exponent): sign, digits with at most one point, at least one digit, an optional
// exponent. strtod alone would also take hexadecimal ("0x96" = 150), "inf" and "nan".
bool IsDecimalNumber(const char* text) {
  const char* c = text;
  if (*c == '+' || *c == '-') ++c;
  int digits = 0;
  while (*c >= '0' && *c <= '9') ++c, ++digits;
  if (*c == '.') {
    ++c;
    while (*c >= '0' && *c <= '9') ++c, ++digits;
  }
  if (digits == 0) return false;
  if (*c == 'E' || *c == 'e' || *c == 'D' || *c == 'd') {
    ++c;
    if (*c == '+' || *c == '-') ++c;
    if (!(*c >= '0' && *c <= '9')) return false;
    while (*c >= '0' && *c <= '9') ++c;
  }
  while (*c == ' ') ++c;
  return *c == '\0';
}

// A card's value: a decimal number, or the text of a value that is not one (a string
// value is left out: it names no number).
struct CardValue {
  std::optional<double> number;
  std::string text;
};

// The value of every "KEY = value" card (later cards win, as astropy reads).
std::map<std::string, CardValue> NumericCards(const std::vector<std::string>& cards) {
  std::map<std::string, CardValue> out;
  for (const std::string& card : cards) {
    char key[FLEN_KEYWORD] = {0}, value[FLEN_VALUE] = {0}, comment[FLEN_COMMENT] = {0};
    int len = 0, status = 0;
    fits_get_keyname(const_cast<char*>(card.c_str()), key, &len, &status);
    fits_parse_value(const_cast<char*>(card.c_str()), value, comment, &status);
    if (status != 0 || value[0] == '\0' || value[0] == '\'') continue;
    CardValue v;
    v.text = value;
    if (IsDecimalNumber(value)) {
      for (char* c = value; *c; ++c) {  // FITS reals may use D exponents
        if (*c == 'D' || *c == 'd') *c = 'E';
      }
      v.number = std::strtod(value, nullptr);
    }
    out[key] = std::move(v);
  }
  return out;
}

// The first of `keys` present: its number, nullopt when none is present, INVALID_ARGUMENT
// when its value is not a decimal number or lies outside [lo, hi] (`hi_open`: [lo, hi)).
absl::StatusOr<std::optional<double>> First(const std::map<std::string, CardValue>& h,
                                            std::initializer_list<const char*> keys, double lo,
                                            double hi, bool hi_open, absl::string_view why) {
  for (const char* k : keys) {
    auto it = h.find(k);
    if (it == h.end()) continue;
    const CardValue& v = it->second;
    if (!v.number) {
      return absl::InvalidArgumentError(absl::StrCat(
          k, " = ", EchoValue(v.text), " in header is not a decimal number"));
    }
    const double d = *v.number;
    if (!(d >= lo && (hi_open ? d < hi : d <= hi))) {
      return absl::InvalidArgumentError(absl::StrCat(k, " = ", EchoValue(v.text),
                                                     " in header is outside [", lo, ", ", hi,
                                                     hi_open ? ")" : "]", " (", why, ")"));
    }
    return std::optional<double>(d);
  }
  return std::optional<double>();
}

absl::StatusOr<double> FactorFromHeader(const std::map<std::string, CardValue>& h) {
  const absl::StatusOr<std::optional<double>> ra =
      First(h, {"TARGTRA", "SKYRA", "TELRA", "RA"}, 0, 360, true, "degrees");
  if (!ra.ok()) return ra.status();
  if (!*ra) return absl::InvalidArgumentError("no TARGTRA nor RA in header");
  const absl::StatusOr<std::optional<double>> dec =
      First(h, {"TARGTDEC", "SKYDEC", "TELDEC", "DEC"}, -90, 90, false, "degrees");
  if (!dec.ok()) return dec.status();
  if (!*dec) return absl::InvalidArgumentError("no TARGTDEC nor DEC in header");
  const absl::StatusOr<std::optional<double>> mjd =
      First(h, {"MJD-OBS", "MJD"}, kMjdMin, kMjdMax, false,
            "1960-01-01 to 2100-01-01, where UTC and the ephemeris hold");
  if (!mjd.ok()) return mjd.status();
  if (!*mjd) return absl::InvalidArgumentError("no MJD-OBS nor MJD in header");
  const absl::StatusOr<std::optional<double>> exptime =
      First(h, {"EXPTIME"}, 0, kMaxExptime, false, "seconds, at most a day");
  if (!exptime.ok()) return exptime.status();
  return BarycentricFactor(**ra, **dec, **mjd + exptime->value_or(0.0) / 2.0 / 3600.0 / 24.0);
}

}  // namespace

double BarycentricFactor(double ra_deg, double dec_deg, double mjd_utc) {
  // Time scales: UTC -> TAI -> TT -> TDB; UT1 = UTC.
  double tai1 = 0, tai2 = 0, tt1 = 0, tt2 = 0, tdb1 = 0, tdb2 = 0;
  eraUtctai(kMjdZero, mjd_utc, &tai1, &tai2);
  eraTaitt(tai1, tai2, &tt1, &tt2);
  const double ut_frac = std::fmod(mjd_utc, 1.0);
  eraTttdb(tt1, tt2, eraDtdb(tt1, tt2, ut_frac, 0.0, 0.0, 0.0), &tdb1, &tdb2);

  // The Earth's barycentric position and velocity (AU, AU/day).
  double pvh[2][3], pvb[2][3];
  eraEpv00(tdb1, tdb2, pvh, pvb);

  // The observatory in GCRS: ITRS position rotated by (CIRS->ITRS)^T then (GCRS->CIRS)^T;
  // velocity = Earth rotation vector (the CIP axis in GCRS) x position.
  double itrs[3];
  eraGd2gc(1 /* WGS84 */, kLonDeg * kDeg, kLatDeg * kDeg, kHeight, itrs);
  double c2i[3][3], pom[3][3], cirs2itrs[3][3], eye[3][3];
  eraC2i06a(tt1, tt2, c2i);
  eraPom00(0.0, 0.0, eraSp00(tt1, tt2), pom);
  eraIr(eye);
  eraC2tcio(eye, eraEra00(kMjdZero, mjd_utc), pom, cirs2itrs);
  double itrs2gcrs[3][3];  // c2i^T * cirs2itrs^T
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      itrs2gcrs[i][j] = 0;
      for (int k = 0; k < 3; ++k) itrs2gcrs[i][j] += c2i[k][i] * cirs2itrs[j][k];
    }
  }
  double pos[3], rot[3], vel[3];
  for (int i = 0; i < 3; ++i) {
    pos[i] = itrs2gcrs[i][0] * itrs[0] + itrs2gcrs[i][1] * itrs[1] + itrs2gcrs[i][2] * itrs[2];
    rot[i] = c2i[2][i] * kOmegaEarth;
  }
  eraPxp(rot, pos, vel);

  // beta of the observer w.r.t. the barycentre, and the target direction (no distance).
  double beta[3];
  for (int i = 0; i < 3; ++i) beta[i] = (pvb[1][i] * kAu / kDay + vel[i]) / kC;
  double target[3] = {std::cos(dec_deg * kDeg) * std::cos(ra_deg * kDeg),
                            std::cos(dec_deg * kDeg) * std::sin(ra_deg * kDeg),
                            std::sin(dec_deg * kDeg)};
  const double b2 = beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2];
  const double gamma = 1.0 / std::sqrt(1.0 - b2);

  // Gravitational redshift at the geocentre's distance from each body (astropy's rule),
  // Earth's at the site's geocentric radius; summed Earth first, as astropy does.
  double earth[3], sun[3], moon[3], jup[3];
  for (int i = 0; i < 3; ++i) {
    earth[i] = pvb[0][i] * kAu;
    sun[i] = (pvb[0][i] - pvh[0][i]) * kAu;
  }
  double pv_moon[2][3], pv_jup[2][3];
  eraMoon98(tdb1, tdb2, pv_moon);
  eraPlan94(tdb1, tdb2, 5, pv_jup);
  for (int i = 0; i < 3; ++i) {
    moon[i] = earth[i] + pv_moon[0][i] * kAu;
    jup[i] = sun[i] + pv_jup[0][i] * kAu;
  }
  const double gr = -kGmEarth / kC / Norm(itrs) - kGmMoon / kC / Distance(moon, earth) -
                    kGmJupiter / kC / Distance(jup, earth) - kGmSun / kC / Distance(sun, earth);

  const double zb = gamma * (1.0 + eraPdp(beta, target)) / (1.0 + gr / kC);
  // desispec: 1 + v/c with v = c (zb - 1) in km/s.
  const double v_kms = kC * (zb - 1.0) / 1000.0;
  return 1.0 + v_kms / (kC / 1000.0);
}

absl::StatusOr<double> BarycentricFactorFromHeaders(const std::vector<std::string>& image_cards,
                                                    const std::vector<std::string>& fibermap_cards) {
  const std::map<std::string, CardValue> image = NumericCards(image_cards);
  if (image.count("RA") != 0 || image.count("TARGTRA") != 0) return FactorFromHeader(image);
  const std::map<std::string, CardValue> fibermap = NumericCards(fibermap_cards);
  if (fibermap.count("RA") != 0 || fibermap.count("TARGTRA") != 0) return FactorFromHeader(fibermap);
  return absl::InvalidArgumentError("Barycentric corr requires (TARGT)RA in HDU 0 or fibermap");
}

absl::StatusOr<double> BarycentricFactorFor(const std::vector<std::string>& image_cards,
                                            const std::string& fibermap_fits) {
  std::vector<std::string> fibermap_cards;
  if (!fibermap_fits.empty()) {
    SPEXD_ASSIGN_OR_RETURN(FitsFile f, FitsFile::OpenMemory(fibermap_fits.data(), fibermap_fits.size(),
                                                            "FIBERMAP"));
    SPEXD_RETURN_IF_ERROR(f.MoveToHdu("FIBERMAP"));
    SPEXD_ASSIGN_OR_RETURN(fibermap_cards, f.ReadUserCards());
  }
  return BarycentricFactorFromHeaders(image_cards, fibermap_cards);
}

absl::StatusOr<BarycentricGrid> ApplyBarycentricCorrection(
    const ExtractionPlan& plan, const std::vector<std::string>& image_cards,
    const std::string& fibermap_fits, ExtractionParams* params) {
  BarycentricGrid out;
  out.grid = plan.grid();
  if (!plan.params().barycentric_correction) return out;
  *params = plan.params();
  SPEXD_ASSIGN_OR_RETURN(out.factor, BarycentricFactorFor(image_cards, fibermap_fits));
  SPEXD_ASSIGN_OR_RETURN(WavelengthGrid grid, MakeOutputGrid(out.grid.wmin, out.grid.wmax, out.grid.dw));
  out.wave = std::move(grid.wave);
  params->has_wavelength = true;
  params->wmin = out.grid.wmin / out.factor;
  params->wmax = out.grid.wmax / out.factor;
  params->dw = out.grid.dw / out.factor;
  return out;
}

}  // namespace spexd::core
