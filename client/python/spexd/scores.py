"""desispec's RAW frame scores (the SCORES HDU), from the definitions of
desispec.specscore.compute_frame_scores as desi_extract_spectra calls it
(suffix="RAW", flux_per_angstrom=False) on the float64 per-Angstrom fluxes.

The C++ writer (core/frame/internal/frame_scores.cc) implements the same definitions with numpy's
arithmetic, so both give the same bits.
"""
import numpy as np

# Top-hat band of each camera, [lo, hi) Angstrom.
TOPHAT = {"b": (4000, 5800), "r": (5800, 7600), "z": (7600, 9800)}


def band_of(wave):
    """b, r or z from the mean wavelength (desispec's auto-detection)."""
    mean = np.mean(wave)
    if mean <= TOPHAT["b"][1]:
        return "b"
    if mean >= TOPHAT["z"][0]:
        return "z"
    return "r"


def raw_scores(wave, flux, ivar):
    """({name: float64[nspec]}, {name: comment}); both empty when no bin is in the band.

    SUM_RAW_COUNT: sum of flux over the band; MEDIAN_RAW_COUNT: median of flux/dwave;
    MEDIAN_RAW_SNR: median of sqrt(ivar) * flux / sqrt(dwave), negative ivar as 0;
    dwave = numpy.gradient(wave). The MASK plays no part (as in desispec).
    """
    wave = np.asarray(wave, dtype=np.float64)
    if len(wave) < 2 or len(flux) == 0:
        return {}, {}
    band = band_of(wave)
    lo, hi = TOPHAT[band]
    inband = (wave >= lo) & (wave < hi)
    if not inband.any():
        return {}, {}
    dwave = np.gradient(wave)
    ivar = np.where(ivar < 0, 0.0, ivar)
    f = flux[:, inband]
    where = f"in wave. range {lo},{hi}A"
    b = band.upper()
    scores = {
        f"SUM_RAW_COUNT_{b}": np.sum(f, axis=1),
        f"MEDIAN_RAW_COUNT_{b}": np.median(f / dwave[inband], axis=1),
        f"MEDIAN_RAW_SNR_{b}": np.median(np.sqrt(ivar[:, inband]) * f / np.sqrt(dwave[inband]),
                                         axis=1),
    }
    comments = {
        f"SUM_RAW_COUNT_{b}": f"sum counts {where}",
        f"MEDIAN_RAW_COUNT_{b}": f"median counts/A {where}",
        f"MEDIAN_RAW_SNR_{b}": f"median SNR/sqrt(A) {where}",
    }
    return scores, comments
