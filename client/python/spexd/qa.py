"""One-page QA plot of an extracted frame (PNG), for a person to judge at a glance
whether the frame is healthy.

    python3 -m spexd.qa FRAME.fits -o qa.png [--model MODEL.fits --image PREPROC.fits]

Panels: median S/N per fibre (fibres far below their neighbours stand out), a few
spectra with their 1-sigma band from IVAR, the CHI2PIX and MASK images over fibre x
wavelength, and, with a model image and the preproc image, the residual
(image - model) * sqrt(ivar) on the CCD. The title line gives the numbers that decide
health (masked bins, BAD2DFIT bins, fibres with no valid bin, median CHI2PIX) and a
verdict; the thresholds are in `health()`.
"""
import argparse
import os
import sys
import warnings

import numpy as np

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


# ---------------------------------------------------------------- drawing (Pillow)
# The page is drawn with Pillow's ImageDraw rather than a plotting library: Debian's
# python3-pil is a few packages, matplotlib about sixty. Axes, ticks and colour maps are
# the few lines below.
WIDTH, HEIGHT = 1600, 1000
_BLACK, _GREY, _LIGHT = (0, 0, 0), (128, 128, 128), (235, 235, 235)
_LINE_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44)]
# Anchors of the colour maps, evenly spaced over [0, 1].
_MAGMA = [(0, 0, 4), (59, 15, 112), (140, 41, 129), (222, 73, 104), (254, 159, 109),
          (252, 253, 191)]
_RED_BLUE = [(5, 48, 97), (67, 147, 195), (247, 247, 247), (214, 96, 77), (103, 0, 31)]
_MASK_COLOURS = [(240, 240, 240), (153, 153, 153), (255, 176, 0), (208, 0, 0), (123, 44, 191)]
_MASK_NAMES = ["good", "other", "SOMEBADPIX", "ALLBADPIX", "BAD2DFIT"]


def _font(size):
    """DejaVu Sans when installed (most desktops have it), else Pillow's own bitmap font
    (one size; what a minimal Debian gets)."""
    from PIL import ImageFont
    for path in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",):
        if os.path.exists(path):
            return ImageFont.truetype(path, size)
    return ImageFont.load_default()


def _text(draw, xy, text, fill, font, anchor="lt"):
    """draw.text with the anchor done here (horizontal l/m/r, vertical t/m/d from the
    text's box): Pillow before 10 ignores anchors with its own bitmap font, the one used
    where no TrueType font is installed."""
    left, top, right, bottom = font.getbbox(text)
    x = xy[0] - left - {"l": 0.0, "m": 0.5, "r": 1.0}[anchor[0]] * (right - left)
    y = xy[1] - {"t": top, "m": (top + bottom) / 2, "d": bottom}[anchor[1]]
    draw.text((x, y), text, fill=fill, font=font)


def _ticks(lo, hi, n=5):
    """About n round tick values in [lo, hi]."""
    if not np.isfinite(lo) or not np.isfinite(hi) or hi <= lo:
        return [lo] if np.isfinite(lo) else []
    raw = (hi - lo) / n
    mag = 10 ** np.floor(np.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = np.ceil(lo / step) * step
    return [float(v) for v in np.arange(first, hi + step * 1e-9, step)]


def _label(v):
    return f"{v:.6g}"


def _colour_map(values, anchors):
    """RGB (uint8, shape + (3,)) of values in [0, 1] (NaN: light grey) on the anchors."""
    v = np.clip(np.nan_to_num(values, nan=0.0), 0, 1)
    pos = np.linspace(0, 1, len(anchors))
    rgb = np.stack([np.interp(v, pos, [a[c] for a in anchors]) for c in range(3)], axis=-1)
    rgb[~np.isfinite(values)] = _LIGHT
    return rgb.astype(np.uint8)


class _Axes:
    """A panel: a box on the page with data limits, ticks, labels and a title."""

    def __init__(self, page, draw, box, xlim, ylim, title, xlabel, ylabel):
        self.page, self.draw = page, draw
        self.x0, self.y0, self.x1, self.y1 = box
        self.xlim, self.ylim = xlim, ylim
        small, mid = _font(11), _font(13)
        _text(draw, ((self.x0 + self.x1) / 2, self.y0 - 6), title, fill=_BLACK, font=mid,
                  anchor="md")
        _text(draw, ((self.x0 + self.x1) / 2, self.y1 + 22), xlabel, fill=_BLACK, font=small,
                  anchor="mt")
        label = _vertical_text(ylabel, small)
        page.paste(label, (int(self.x0 - 58), int((self.y0 + self.y1 - label.height) / 2)))
        for v in _ticks(*xlim):
            x = self.px(v, ylim[0])[0]
            draw.line([(x, self.y1), (x, self.y1 + 4)], fill=_BLACK)
            _text(draw, (x, self.y1 + 6), _label(v), fill=_BLACK, font=small, anchor="mt")
        for v in _ticks(*ylim):
            y = self.px(xlim[0], v)[1]
            draw.line([(self.x0 - 4, y), (self.x0, y)], fill=_BLACK)
            _text(draw, (self.x0 - 6, y), _label(v), fill=_BLACK, font=small, anchor="rm")

    def frame(self):
        self.draw.rectangle([self.x0, self.y0, self.x1, self.y1], outline=_BLACK)

    def px(self, x, y):
        """Page pixel of data (x, y) (arrays allowed)."""
        (a, b), (c, d) = self.xlim, self.ylim
        sx = self.x0 + (np.asarray(x, float) - a) / ((b - a) or 1) * (self.x1 - self.x0)
        sy = self.y1 - (np.asarray(y, float) - c) / ((d - c) or 1) * (self.y1 - self.y0)
        return sx, sy

    def image(self, rgb):
        """An RGB array (row 0 at the bottom) stretched over the whole panel."""
        from PIL import Image
        im = Image.fromarray(np.ascontiguousarray(rgb[::-1]), "RGB")
        size = (int(self.x1 - self.x0), int(self.y1 - self.y0))
        self.page.paste(im.resize(size, Image.NEAREST), (int(self.x0), int(self.y0)))

    def clip_y(self, y):
        return np.clip(y, self.y0, self.y1)


def _vertical_text(text, font):
    """The text turned 90 degrees (a y-axis label) as an RGB image on white."""
    from PIL import Image, ImageDraw
    left, top, right, bottom = font.getbbox(text)
    im = Image.new("RGB", (right - left + 4, max(bottom, 14) + 2), "white")
    ImageDraw.Draw(im).text((2 - left, 1), text, fill=_BLACK, font=font)
    return im.rotate(90, expand=True)


def _colour_bar(draw, box, anchors_or_colours, labels, font):
    """A vertical bar at box with labels [(fraction 0..1 from the bottom, text)]."""
    x0, y0, x1, y1 = box
    n = y1 - y0
    for k in range(int(n)):
        f = k / max(n - 1, 1)
        if isinstance(anchors_or_colours, list):
            colour = tuple(int(c) for c in _colour_map(np.array([f]), anchors_or_colours)[0])
        else:
            colour = anchors_or_colours(f)
        draw.line([(x0, y1 - k), (x1, y1 - k)], fill=colour)
    draw.rectangle(box, outline=_BLACK)
    for f, text in labels:
        y = y1 - f * (y1 - y0)
        draw.line([(x1, y), (x1 + 3, y)], fill=_BLACK)
        _text(draw, (x1 + 5, y), text, fill=_BLACK, font=font, anchor="lm")


def _snr_panel(page, draw, box, frame, snr):
    nspec = len(snr)
    fibres = frame["fibermin"] + np.arange(nspec)
    med = float(np.median(snr)) if nspec else 0.0
    top = float(np.max(snr)) if nspec else 1.0
    ax = _Axes(page, draw, box, (fibres[0] - 1, fibres[-1] + 1) if nspec else (0, 1),
               (0.0, 1.1 * max(top, 1e-9)), "median S/N per fibre (unmasked bins)",
               "fibre", "median S/N per bin")
    y = ax.px(0, med)[1]
    for x in range(int(ax.x0), int(ax.x1), 8):  # dashed median line
        draw.line([(x, y), (min(x + 4, ax.x1), y)], fill=_GREY)
    low = snr < 0.5 * med
    xs, ys = ax.px(fibres, snr)
    for x, y, bad in zip(xs, ys, low):
        r = 4 if bad else 2
        draw.ellipse([x - r, y - r, x + r, y + r], fill=(220, 0, 0) if bad else _LINE_COLOURS[0])
    small = _font(11)
    _text(draw, (ax.x1 - 6, ax.y0 + 6), f"dashed: median {med:.1f}; red: < half the median",
              fill=_BLACK, font=small, anchor="rt")
    ax.frame()


def _spectra_panel(page, draw, box, frame, snr):
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
    ax = _Axes(page, draw, box, (float(wave[0]), float(wave[-1])), (lo, hi),
               "spectra: best, median, worst S/N (x = masked bin)", "wavelength [A]",
               "flux [electron/A] (offset), band: 1 sigma")
    small = _font(11)
    for k, (i, off) in enumerate(zip(picks, offsets)):
        colour = _LINE_COLOURS[k % len(_LINE_COLOURS)]
        band = tuple(int(255 - 0.35 * (255 - c)) for c in colour)
        flux, ivar = frame["flux"][i] + off, frame["ivar"][i]
        sigma = 1 / np.sqrt(np.where(ivar > 0, ivar, 1))
        # The band as one vertical stroke per bin (bins with ivar = 0 have none).
        good = ivar > 0
        xs, up = ax.px(wave[good], flux[good] + sigma[good])
        _, dn = ax.px(wave[good], flux[good] - sigma[good])
        for x, a, b in zip(xs, ax.clip_y(up), ax.clip_y(dn)):
            draw.line([(x, a), (x, b)], fill=band, width=2)
        xs, ys = ax.px(wave, flux)
        draw.line(list(zip(xs, ax.clip_y(ys))), fill=colour, width=1)
        bad = frame["mask"][i] != 0
        for x, y in zip(xs[bad], ax.clip_y(ys[bad])):
            draw.line([(x - 2, y - 2), (x + 2, y + 2)], fill=(220, 0, 0))
            draw.line([(x - 2, y + 2), (x + 2, y - 2)], fill=(220, 0, 0))
        _text(draw, (ax.x1 - 6, ax.y0 + 6 + 15 * k),
                  f"fibre {frame['fibermin'] + i} (S/N {snr[i]:.1f})", fill=colour, font=small,
                  anchor="rt")
    ax.frame()


def _fibre_wave_axes(page, draw, box, frame, title):
    wave, f0, n = frame["wave"], frame["fibermin"], frame["flux"].shape[0]
    return _Axes(page, draw, box, (float(wave[0]), float(wave[-1])), (f0 - 0.5, f0 + n - 0.5),
                 title, "wavelength [A]", "fibre")


def _chi2_panel(page, draw, box, frame):
    ax = _fibre_wave_axes(page, draw, box, frame, "CHI2PIX (log; ~1 is good)")
    vmin, vmax = 0.1, max(100.0, float(np.max(frame["chi2pix"])))
    chi2 = np.clip(frame["chi2pix"], 1e-2, None)
    scaled = (np.log10(chi2) - np.log10(vmin)) / (np.log10(vmax) - np.log10(vmin))
    ax.image(_colour_map(scaled, _MAGMA))
    ax.frame()
    labels = [((np.log10(v) - np.log10(vmin)) / (np.log10(vmax) - np.log10(vmin)), _label(v))
              for v in (0.1, 1, 10, 100, 1000, 10000) if v <= vmax]
    _colour_bar(draw, (ax.x1 + 10, ax.y0, ax.x1 + 24, ax.y1), _MAGMA, labels, _font(11))


def _mask_panel(page, draw, box, frame):
    ax = _fibre_wave_axes(page, draw, box, frame, "MASK (white: good)")
    m = frame["mask"]
    cls = np.zeros(m.shape, np.int8)  # 0 good, 1 other bits, 2 SOMEBADPIX, 3 ALLBADPIX, 4 BAD2DFIT
    cls[m != 0] = 1
    cls[(m & SOMEBADPIX) != 0] = 2
    cls[(m & ALLBADPIX) != 0] = 3
    cls[(m & BAD2DFIT) != 0] = 4
    ax.image(np.array(_MASK_COLOURS, np.uint8)[cls])
    ax.frame()
    n = len(_MASK_COLOURS)
    _colour_bar(draw, (ax.x1 + 10, ax.y0, ax.x1 + 24, ax.y1),
                lambda f: _MASK_COLOURS[min(int(f * n), n - 1)],
                [((k + 0.5) / n, name) for k, name in enumerate(_MASK_NAMES)], _font(10))


def _residual_panel(page, draw, box, model_path, image_path):
    res, (x0, y0) = residual_image(model_path, image_path)
    finite = res[np.isfinite(res)]
    rms = np.sqrt(np.mean(finite ** 2)) if finite.size else float("nan")
    # The model image is gpu_specter's A_core * (R-convolved flux) (extraction-spec
    # §2.11): blurred by R and again by the PSF, so bright lines leave +/- stripes
    # along the wavelength direction even in a healthy frame.
    ax = _Axes(page, draw, box, (x0 - 0.5, x0 + res.shape[1] - 0.5),
               (y0 - 0.5, y0 + res.shape[0] - 0.5),
               f"(image - model)/sigma on the CCD, rms {rms:.2f}", "CCD x", "CCD y")
    _text(draw, ((ax.x0 + ax.x1) / 2, ax.y0 - 24),
              "(model = A R f as gpu_specter: bright lines leave stripes)", fill=_GREY,
              font=_font(11), anchor="md")
    ax.image(_colour_map((res + 5) / 10, _RED_BLUE))
    ax.frame()
    _colour_bar(draw, (ax.x1 + 10, ax.y0, ax.x1 + 24, ax.y1), _RED_BLUE,
                [((v + 5) / 10, f"{v:+d}" if v else "0 sigma") for v in (-5, -2, 0, 2, 5)],
                _font(11))
    return rms


def draw(frame_path, out_path, model_path=None, image_path=None):
    """Writes the QA page of `frame_path` to `out_path` (PNG, 1600 x 1000 pixels),
    atomically (a temporary file in the same directory, then a rename)."""
    from PIL import Image, ImageDraw

    frame = read_frame(frame_path)
    snr = median_snr(frame["flux"], frame["ivar"], frame["mask"])
    verdict, problems, numbers = health(frame)
    nspec, nwave = frame["flux"].shape

    page = Image.new("RGB", (WIDTH, HEIGHT), "white")
    d = ImageDraw.Draw(page)
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
    title = _font(16)
    for k, line in enumerate(lines):
        _text(d, (WIDTH / 2, 10 + 22 * k), line, fill=colour, font=title, anchor="mt")

    # Two rows of three columns below the title; the spectra take two columns.
    top = 10 + 22 * len(lines) + 40
    row_h = (HEIGHT - top - 60 - 70) // 2
    cols = [(80, 540), (620, 1080), (1150, 1520)]
    rows = [(top, top + row_h), (top + row_h + 90, top + 2 * row_h + 90)]

    def box(r, c0, c1=None):
        return (cols[c0][0], rows[r][0], cols[c1 if c1 is not None else c0][1], rows[r][1])

    _snr_panel(page, d, box(0, 0), frame, snr)
    _spectra_panel(page, d, box(0, 1, 2), frame, snr)
    if frame["chi2pix"] is not None:
        _chi2_panel(page, d, (cols[0][0], rows[1][0], cols[0][1] - 40, rows[1][1]), frame)
    _mask_panel(page, d, (cols[1][0], rows[1][0], cols[1][1] - 100, rows[1][1]), frame)
    if model_path and image_path:
        _residual_panel(page, d, (cols[2][0] + 40, rows[1][0], cols[2][1] - 40, rows[1][1]),
                        model_path, image_path)
    else:
        b = box(1, 2)
        for k, line in enumerate(["no model image given", "(--model MODEL --image PREPROC",
                                  "draws the residual (image - model)/sigma)"]):
            _text(d, ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2 + 20 * (k - 1)), line, fill=_GREY,
                  font=_font(14), anchor="mm")
    tmp = f"{out_path}.tmp-{os.getpid()}"
    try:
        page.save(tmp, format="PNG")
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return verdict


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m spexd.qa", description=__doc__.split("\n")[0])
    ap.add_argument("frame", help="desispec frame file (spexctl, spexd or spexd.Client)")
    ap.add_argument("-o", "--output", help="PNG to write (without it: the numbers only)")
    ap.add_argument("--model", help="model image (spexctl extract -m / want_model)")
    ap.add_argument("--image", help="the preproc file that was extracted (for the residual)")
    a = ap.parse_args(argv)
    if bool(a.model) != bool(a.image):
        ap.error("--model and --image go together")
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
