// desi_extract_spectra --barycentric-correction: the multiplicative factor that brings
// wavelengths to the solar-system barycentre, from the pointing and time keys of the
// preproc (or fibermap) header, computed with ERFA as desispec does through astropy.
#ifndef SPEXD_CORE_PLAN_BARYCENTRIC_H_
#define SPEXD_CORE_PLAN_BARYCENTRIC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/extraction_params.h"

namespace spexd::core {

// 1 + v/c at Kitt Peak (desispec.heliocentric's site: lat 31.96403, lon -111.59989 deg,
// 2097 m, WGS84) towards ICRS (ra, dec) [deg] at `mjd_utc`: astropy's
// SkyCoord.radial_velocity_correction("barycentric") (Wright & Eastman 2014 eq. 28:
// observer velocity from ERFA epv00 plus the Earth's rotation, the Lorentz factor, and the
// gravitational redshift of the Sun, Jupiter, the Moon and the Earth). UT1 is taken as UTC
// and polar motion as 0 (no IERS tables): below 1e-11 in the factor.
double BarycentricFactor(double ra_deg, double dec_deg, double mjd_utc);

// desispec.scripts.extract's choice of header and keys: the image header when it has RA or
// TARGTRA, else the fibermap header when it does; RA from TARGTRA, SKYRA, TELRA, RA; DEC
// likewise; MJD-OBS or MJD; EXPTIME (0 when absent) shifts the time to mid-exposure.
// INVALID_ARGUMENT with desispec's messages ("no TARGTDEC nor DEC in header", ...) when a
// key is missing, and when a key's value is not a decimal number (FITS integer or real:
// no hexadecimal, inf or nan) or is out of range: RA in [0, 360), DEC in [-90, 90],
// MJD in [36934, 88069] (1960 to 2100: UTC's and the ephemeris's span), EXPTIME in
// [0, 86400] s. Cards are 80-character FITS header cards.
absl::StatusOr<double> BarycentricFactorFromHeaders(const std::vector<std::string>& image_cards,
                                                    const std::vector<std::string>& fibermap_cards);

// The same with the fibermap given as FITS bytes with a FIBERMAP HDU ("" for none).
absl::StatusOr<double> BarycentricFactorFor(const std::vector<std::string>& image_cards,
                                            const std::string& fibermap_fits);

// What --barycentric-correction changes: HELIOCOR, and the uncorrected grid that the
// frame's WAVELENGTH HDU and WAVEMIN/WAVEMAX/WAVESTEP keep.
struct BarycentricGrid {
  double factor = 1.0;
  GridRequest grid;          // uncorrected (as requested, or the PSF domain)
  std::vector<double> wave;  // numpy arange of `grid`; empty when factor is 1
};

// When plan.params().barycentric_correction: computes the factor from the headers and
// sets *params to the plan's parameters with its requested grid divided by the factor
// (desi_extract_spectra extracts on wave / HELIOCOR) and has_wavelength set; the caller
// makes the new plan from them (ExtractionPlan::Create). Otherwise returns factor 1 and
// the plan's grid, leaving *params unchanged.
absl::StatusOr<BarycentricGrid> ApplyBarycentricCorrection(
    const ExtractionPlan& plan, const std::vector<std::string>& image_cards,
    const std::string& fibermap_fits, ExtractionParams* params);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PLAN_BARYCENTRIC_H_
