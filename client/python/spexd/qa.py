"""One-page QA plot of an extracted frame: an SVG page, for a web browser.

It lets a person judge at a glance whether the frame is healthy.

    python3 -m spexd.qa FRAME.fits -o qa.svg [--model MODEL.fits --image PREPROC.fits]

Panels: median S/N per fibre (fibres far below their neighbours stand out), a few
spectra with their 1-sigma band from IVAR, the CHI2PIX and MASK images over fibre x
wavelength, and, with a model image and the preproc image, the residual
(image - model) * sqrt(ivar) on the CCD. The title line gives the numbers that decide
health (masked bins, BAD2DFIT bins, fibres with no valid bin, median CHI2PIX) and a
verdict; the thresholds are in `health()`. Needs numpy and fitsio only: the page is
written as SVG text, its images as PNGs (spexd.svg_draw).
"""
import argparse
import os
import sys
import warnings

import numpy as np

from spexd import svg_draw
from spexd.frame_file import QA_KEYWORDS
from spexd.result import ALLBADPIX, BAD2DFIT, SOMEBADPIX


def read_frame(path):
    """The arrays of a desispec frame file (spexctl's, the server's or the client's).
    Read with fitsio (CFITSIO, Debian's python3-fitsio): a much smaller install than
    astropy, and it reads .fits.gz as it is."""
    import fitsio

    with fitsio.FITS(path) as f:
        hdr = f["FLUX"].read_header()
        frame = {
            "flux": f["FLUX"].read().astype(np.float64),
            "ivar": f["IVAR"].read().astype(np.float64),
            "mask": f["MASK"].read().astype(np.uint32),
            "wave": f["WAVELENGTH"].read().astype(np.float64),
            "chi2pix": f["CHI2PIX"].read().astype(np.float64) if "CHI2PIX" in f else None,
            "fibermin": int(hdr.get("FIBERMIN", 0)),
            "camera": str(hdr.get("CAMERA", "")).strip(),
            "expid": hdr.get("EXPID", ""),
            # The server's numerical health, when the file carries it (frame_file.QA_KEYWORDS).
            "server_qa": {field: hdr[key] for key, (field, _) in QA_KEYWORDS.items() if key in hdr},
        }
    return frame


def median_snr(flux, ivar, mask):
    """Median of flux * sqrt(ivar) over the unmasked bins with ivar > 0, per fibre."""
    good = (ivar > 0) & (mask == 0)
    snr = np.where(good, flux * np.sqrt(np.where(good, ivar, 0)), np.nan)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a fibre without a valid bin: 0 below
        out = np.nanmedian(snr, axis=1) if snr.size else np.zeros(len(flux))
    return np.where(good.any(axis=1), out, 0.0)


def health(frame):
    """(verdict, problems, numbers). Thresholds: more than 5 % of bins masked, more
    than 1 % BAD2DFIT, any fibre without a valid bin, or median CHI2PIX above 4 (a model
    that does not describe the pixels) make the frame suspect."""
    mask, ivar = frame["mask"], frame["ivar"]
    n = max(mask.size, 1)
    numbers = {
        "masked": np.count_nonzero(mask) / n,
        "bad2dfit": np.count_nonzero(mask & BAD2DFIT) / n,
        "dead_fibres": int(np.count_nonzero(~((ivar > 0) & (mask == 0)).any(axis=1))),
        "median_chi2pix": float(np.median(frame["chi2pix"])) if frame["chi2pix"] is not None
        else float("nan"),
    }
    problems = []
    if numbers["masked"] > 0.05:
        problems.append(f"{100 * numbers['masked']:.1f}% of bins masked")
    if numbers["bad2dfit"] > 0.01:
        problems.append(f"{100 * numbers['bad2dfit']:.1f}% BAD2DFIT")
    if numbers["dead_fibres"]:
        problems.append(f"{numbers['dead_fibres']} fibres without a valid bin")
    if numbers["median_chi2pix"] > 4:
        problems.append(f"median CHI2PIX {numbers['median_chi2pix']:.1f}")
    return ("OK" if not problems else "CHECK"), problems, numbers


def server_qa_lines(qa):
    """The server's numerical-health numbers (a FrameQa dict) as text lines; [] for none."""
    if not qa:
        return []
    shadow = qa.get("shadow_parity") or "not sampled"
    if qa.get("shadow_parity"):
        shadow += f" (bundle {qa.get('shadow_bundle')})"
    bins = max(int(qa.get("bins", 0)), 1)
    return [
        f"server QA (request {qa.get('request_id', '?')}): worst condition "
        f"{float(qa.get('worst_condition', 0)):.3g} (bundle {qa.get('worst_condition_bundle', '?')}), "
        f"{qa.get('retried_patches', 0)} retried, {qa.get('failed_patches', 0)} failed patches",
        f"SOMEBADPIX {100 * qa.get('somebadpix_bins', 0) / bins:.2f}%  "
        f"ALLBADPIX {100 * qa.get('allbadpix_bins', 0) / bins:.2f}%  "
        f"BAD2DFIT {100 * qa.get('bad2dfit_bins', 0) / bins:.2f}%  "
        f"median chi2pix {float(qa.get('median_chi2pix', 0)):.3f}  shadow parity {shadow}",
    ]


def residual_image(model_path, image_path, margin=20):
    """(image - model) * sqrt(ivar) over the part of the CCD the model covers (plus a
    margin), NaN where masked or ivar = 0; and the (x0, y0) of that cut-out."""
    import fitsio

    with fitsio.FITS(model_path) as m:
        model = m[0].read().astype(np.float64)
    with fitsio.FITS(image_path) as p:
        image = p["IMAGE"].read().astype(np.float64)
        ivar = p["IVAR"].read().astype(np.float64)
        mask = p["MASK"].read() if "MASK" in p else np.zeros(image.shape, np.int32)
    if model.shape != image.shape:
        raise ValueError(f"model {model.shape} and image {image.shape} differ in shape")
    ys, xs = np.nonzero(model)
    if ys.size:
        y0, y1 = max(ys.min() - margin, 0), min(ys.max() + margin + 1, model.shape[0])
        x0, x1 = max(xs.min() - margin, 0), min(xs.max() + margin + 1, model.shape[1])
    else:
        y0, y1, x0, x1 = 0, model.shape[0], 0, model.shape[1]
    cut = (slice(y0, y1), slice(x0, x1))
    good = (ivar[cut] > 0) & (mask[cut] == 0)
    res = (image[cut] - model[cut]) * np.sqrt(np.where(good, ivar[cut], 0))
    return np.where(good, res, np.nan), (x0, y0)


# ---------------------------------------------------------------- drawing (SVG)
# The page is an SVG file written with the standard library and numpy (spexd.svg_draw):
# text, axes, lines and colour bars are SVG elements, the three images are PNGs inside it.
# A plotting or imaging library would be most of the demo's install: Debian's
# python3-matplotlib is about sixty packages, python3-pil about 24 (X11, TIFF, WebP and
# HarfBuzz libraries among them).
WIDTH, HEIGHT = 1600, 1000
_LINE_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44)]
# Anchors of the colour maps, evenly spaced over [0, 1].
_MAGMA = [(0, 0, 4), (59, 15, 112), (140, 41, 129), (222, 73, 104), (254, 159, 109),
          (252, 253, 191)]
_RED_BLUE = [(5, 48, 97), (67, 147, 195), (247, 247, 247), (214, 96, 77), (103, 0, 31)]
_MASK_COLOURS = [(240, 240, 240), (153, 153, 153), (255, 176, 0), (208, 0, 0), (123, 44, 191)]
_MASK_NAMES = ["good", "other", "SOMEBADPIX", "ALLBADPIX", "BAD2DFIT"]
# Images larger than this (pixels along either axis) are shown in blocks, so that a full
# frame's page stays under 3 MB (2.5 MB where CHI2PIX and the residual are pure noise,
# which deflate cannot shrink): a whole frame's CHI2PIX and MASK (500 x 2881) are shown
# bin for bin, a whole CCD's residual (4128 x 4114) in 5 x 5 blocks.
_MAX_FIBRE_WAVE = 3000
_MAX_CCD = 1000


def _snr_panel(svg, box, frame, snr):
    nspec = len(snr)
    fibres = frame["fibermin"] + np.arange(nspec)
    med = float(np.median(snr)) if nspec else 0.0
    top = float(np.max(snr)) if nspec else 1.0
    ax = svg_draw.Axes(svg, box, (fibres[0] - 1, fibres[-1] + 1) if nspec else (0, 1),
                       (0.0, 1.1 * max(top, 1e-9)), "median S/N per fibre (unmasked bins)",
                       "fibre", "median S/N per bin")
    y = float(ax.px(0, med)[1])
    svg.path(f"M{ax.x0:.1f} {y:.1f}H{ax.x1:.1f}", svg_draw.GREY, extra=' stroke-dasharray="4 4"')
    low = snr < 0.5 * med
    xs, ys = ax.px(fibres, snr)
    for bad, colour, r in ((False, _LINE_COLOURS[0], 2), (True, svg_draw.RED, 4)):
        dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}"/>'
                       for x, y in zip(xs[low == bad], ys[low == bad]) if np.isfinite(y))
        if dots:
            svg.add(f'<g fill="{svg_draw.hex_colour(colour)}">{dots}</g>')
    svg.text(ax.x1 - 6, ax.y0 + 6, f"dashed: median {med:.1f}; red: < half the median",
             anchor="rt")
    ax.frame()


def _spectra_panel(svg, box, frame, snr):
    """Three fibres: the best, the median and the worst by S/N, offset for clarity."""
    order = np.argsort(snr)
    picks = sorted({int(order[-1]), int(order[len(order) // 2]), int(order[0])},
                   key=lambda i: -snr[i])
    wave = frame["wave"]
    offsets, offset = [], 0.0
    for i in picks:
        flux = frame["flux"][i]
        offsets.append(offset)
        top = np.nanpercentile(flux, 99.5) if flux.size else 0
        offset += 1.2 * max(top, 1e-9)
    shifted = frame["flux"][picks] + np.array(offsets)[:, None]
    lo = min(float(np.nanmin(shifted)), 0.0) if shifted.size else 0.0
    hi = max(float(np.nanmax(shifted)) if shifted.size else 0.0, offset, lo + 1e-9)
    ax = svg_draw.Axes(svg, box, (float(wave[0]), float(wave[-1])), (lo, hi),
                       "spectra: best, median, worst S/N (x = masked bin)", "wavelength [A]",
                       "flux [electron/A] (offset), band: 1 sigma")
    ax.begin_clip()
    for k, (i, off) in enumerate(zip(picks, offsets)):
        colour = _LINE_COLOURS[k % len(_LINE_COLOURS)]
        band = tuple(int(255 - 0.35 * (255 - c)) for c in colour)
        flux, ivar = frame["flux"][i] + off, frame["ivar"][i]
        sigma = 1 / np.sqrt(np.where(ivar > 0, ivar, 1))
        # The band as one vertical stroke per bin (bins with ivar = 0 have none).
        good = (ivar > 0) & np.isfinite(flux)
        xs, up = ax.px(wave[good], flux[good] + sigma[good])
        _, dn = ax.px(wave[good], flux[good] - sigma[good])
        svg.path("".join(f"M{x:.1f} {a:.1f}V{b:.1f}" for x, a, b in zip(xs, up, dn)), band,
                 width=2)
        xs, ys = ax.px(wave, flux)
        for start, stop in svg_draw.runs(np.isfinite(ys)):
            points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs[start:stop], ys[start:stop]))
            svg.add(f'<polyline points="{points}" fill="none" '
                    f'stroke="{svg_draw.hex_colour(colour)}" stroke-width="1"/>')
        bad = (frame["mask"][i] != 0) & np.isfinite(ys)
        svg.path("".join(f"M{x - 2:.1f} {y - 2:.1f}l4 4m0 -4l-4 4"
                         for x, y in zip(xs[bad], ys[bad])), svg_draw.RED)
    ax.end_clip()
    for k, i in enumerate(picks):
        svg.text(ax.x1 - 6, ax.y0 + 6 + 15 * k, f"fibre {frame['fibermin'] + i} (S/N {snr[i]:.1f})",
                 fill=_LINE_COLOURS[k % len(_LINE_COLOURS)], anchor="rt")
    ax.frame()


def _fibre_wave_axes(svg, box, frame, title):
    wave, f0, n = frame["wave"], frame["fibermin"], frame["flux"].shape[0]
    return svg_draw.Axes(svg, box, (float(wave[0]), float(wave[-1])), (f0 - 0.5, f0 + n - 0.5),
                         title, "wavelength [A]", "fibre")


def _block_note(factors, what):
    fy, fx = factors
    return f"each pixel: {what} of {fy} fibre(s) x {fx} bins" if fy * fx > 1 else None


def _chi2_panel(svg, box, frame):
    ax = _fibre_wave_axes(svg, box, frame, "CHI2PIX (log; ~1 is good)")
    vmin, vmax = 0.1, max(100.0, float(np.max(frame["chi2pix"])))
    # In blocks, the largest value: a poor fit stays visible (NaN spreads to its block).
    factors = svg_draw.block_factors(frame["chi2pix"].shape, _MAX_FIBRE_WAVE)
    chi2 = svg_draw.blocks(np.clip(frame["chi2pix"], 1e-2, None), factors, np.max, -np.inf)
    scaled = (np.log10(chi2) - np.log10(vmin)) / (np.log10(vmax) - np.log10(vmin))
    ax.image(svg_draw.map_indices(scaled), svg_draw.map_palette(_MAGMA))
    ax.frame()
    note = _block_note(factors, "the largest")
    if note:
        ax.note(note)
    span = np.log10(vmax) - np.log10(vmin)
    labels = [((np.log10(v) - np.log10(vmin)) / span, svg_draw.tick_label(v))
              for v in (0.1, 1, 10, 100, 1000, 10000) if v <= vmax]
    svg_draw.colour_bar(svg, (ax.x1 + 10, ax.y0, ax.x1 + 24, ax.y1), _MAGMA, labels)


def _mask_panel(svg, box, frame):
    ax = _fibre_wave_axes(svg, box, frame, "MASK (white: good)")
    m = frame["mask"]
    cls = np.zeros(m.shape, np.uint8)  # 0 good, 1 other bits, 2 SOMEBADPIX, 3 ALLBADPIX, 4 BAD2DFIT
    cls[m != 0] = 1
    cls[(m & SOMEBADPIX) != 0] = 2
    cls[(m & ALLBADPIX) != 0] = 3
    cls[(m & BAD2DFIT) != 0] = 4
    # In blocks, the worst class (the classes go up in severity).
    factors = svg_draw.block_factors(cls.shape, _MAX_FIBRE_WAVE)
    ax.image(svg_draw.blocks(cls, factors, np.max, 0), _MASK_COLOURS)
    ax.frame()
    note = _block_note(factors, "the worst")
    if note:
        ax.note(note)
    n = len(_MASK_COLOURS)
    svg_draw.colour_bar(svg, (ax.x1 + 10, ax.y0, ax.x1 + 24, ax.y1), _MASK_COLOURS,
                        [((k + 0.5) / n, name) for k, name in enumerate(_MASK_NAMES)], size=10,
                        bands=True)


def _residual_panel(svg, box, model_path, image_path):
    res, (x0, y0) = residual_image(model_path, image_path)
    finite = np.isfinite(res)
    rms = np.sqrt(np.mean(res[finite] ** 2)) if finite.any() else float("nan")
    # The model image is gpu_specter's A_core * (R-convolved flux) (extraction-spec
    # §2.11): blurred by R and again by the PSF, so bright lines leave +/- stripes
    # along the wavelength direction even in a healthy frame.
    ax = svg_draw.Axes(svg, box, (x0 - 0.5, x0 + res.shape[1] - 0.5),
                       (y0 - 0.5, y0 + res.shape[0] - 0.5),
                       f"(image - model)/sigma on the CCD, rms {rms:.2f}", "CCD x", "CCD y")
    ax.note("(model = A R f as gpu_specter: bright lines leave stripes)")
    # In blocks, the sum over the block's valid pixels / sqrt(their number): still unit
    # variance where the model describes the pixels, and a systematic offset grows.
    factors = svg_draw.block_factors(res.shape, _MAX_CCD)
    total = svg_draw.blocks(np.where(finite, res, 0.0), factors, np.sum, 0.0)
    count = svg_draw.blocks(finite.astype(np.int64), factors, np.sum, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shown = np.where(count > 0, total / np.sqrt(count), np.nan)
    fy, fx = factors
    if fy * fx > 1:
        ax.note(f"each pixel: {fy} x {fx} CCD pixels, sum / sqrt(n)", line=2)
    ax.image(svg_draw.map_indices((shown + 5) / 10), svg_draw.map_palette(_RED_BLUE))
    ax.frame()
    svg_draw.colour_bar(svg, (ax.x1 + 10, ax.y0, ax.x1 + 24, ax.y1), _RED_BLUE,
                        [((v + 5) / 10, f"{v:+d}" if v else "0 sigma") for v in (-5, -2, 0, 2, 5)])
    return rms


def draw(frame_path, out_path, model_path=None, image_path=None):
    """Writes the QA page of `frame_path` to `out_path` (an SVG file, 1600 x 1000, that a
    web browser shows), atomically (a temporary file in the same directory, then a
    rename). Returns the verdict."""
    if not str(out_path).endswith(".svg"):
        raise ValueError(f"the QA page is an SVG file: {out_path} does not end in .svg")
    frame = read_frame(frame_path)
    snr = median_snr(frame["flux"], frame["ivar"], frame["mask"])
    verdict, problems, numbers = health(frame)
    nspec, nwave = frame["flux"].shape

    svg = svg_draw.Svg(WIDTH, HEIGHT)
    colour = (0, 100, 0) if verdict == "OK" else (178, 34, 34)
    lines = [
        f"{os.path.basename(frame_path)}  camera {frame['camera'] or '?'}  "
        f"{nspec} fibres x {nwave} bins  |  {verdict}"
        + (": " + "; ".join(problems) if problems else ""),
        f"median S/N {np.median(snr):.1f}   masked bins {100 * numbers['masked']:.2f}%   "
        f"BAD2DFIT {100 * numbers['bad2dfit']:.2f}%   "
        f"median CHI2PIX {numbers['median_chi2pix']:.2f}   "
        f"fibres without valid bins {numbers['dead_fibres']}",
    ] + server_qa_lines(frame["server_qa"])
    for k, line in enumerate(lines):
        svg.text(WIDTH / 2, 10 + 22 * k, line, fill=colour, size=16, anchor="mt")

    # Two rows of three columns below the title; the spectra take two columns.
    top = 10 + 22 * len(lines) + 40
    row_h = (HEIGHT - top - 60 - 70) // 2
    cols = [(80, 540), (620, 1080), (1150, 1520)]
    rows = [(top, top + row_h), (top + row_h + 90, top + 2 * row_h + 90)]

    def box(r, c0, c1=None):
        return (cols[c0][0], rows[r][0], cols[c1 if c1 is not None else c0][1], rows[r][1])

    _snr_panel(svg, box(0, 0), frame, snr)
    _spectra_panel(svg, box(0, 1, 2), frame, snr)
    if frame["chi2pix"] is not None:
        _chi2_panel(svg, (cols[0][0], rows[1][0], cols[0][1] - 40, rows[1][1]), frame)
    _mask_panel(svg, (cols[1][0], rows[1][0], cols[1][1] - 100, rows[1][1]), frame)
    if model_path and image_path:
        _residual_panel(svg, (cols[2][0] + 40, rows[1][0], cols[2][1] - 40, rows[1][1]),
                        model_path, image_path)
    else:
        b = box(1, 2)
        for k, line in enumerate(["no model image given", "(--model MODEL --image PREPROC",
                                  "draws the residual (image - model)/sigma)"]):
            svg.text((b[0] + b[2]) / 2, (b[1] + b[3]) / 2 + 20 * (k - 1), line, fill=svg_draw.GREY,
                     size=14, anchor="mm")
    svg.write(out_path)
    return verdict


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m spexd.qa", description=__doc__.split("\n")[0])
    ap.add_argument("frame", help="desispec frame file (spexctl, spexd or spexd.Client)")
    ap.add_argument("-o", "--output",
                    help="the page to write, an SVG file (without it: the numbers only)")
    ap.add_argument("--model", help="model image (spexctl extract -m / want_model)")
    ap.add_argument("--image", help="the preproc file that was extracted (for the residual)")
    a = ap.parse_args(argv)
    if bool(a.model) != bool(a.image):
        ap.error("--model and --image go together")
    if a.output and not a.output.endswith(".svg"):
        ap.error(f"-o {a.output}: the QA page is an SVG file (for a web browser): "
                 "give a name ending in .svg, e.g. qa.svg")
    frame = read_frame(a.frame)
    verdict, problems, numbers = health(frame)
    for line in server_qa_lines(frame["server_qa"]):
        print(f"spexd.qa: {line}")
    if not a.output:
        print(f"spexd.qa: {a.frame}: {verdict}" + (": " + "; ".join(problems) if problems else ""))
        return 0
    verdict = draw(a.frame, a.output, a.model, a.image)
    print(f"spexd.qa: {a.output} ({verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
