"""One-page QA plot of an extracted frame, drawn with matplotlib.

It lets a person judge at a glance whether the frame is healthy.

    python3 -m spexd.qa FRAME.fits -o qa.png [--model MODEL.fits --image PREPROC.fits]

The page is a PNG, or an SVG or PDF file when the name ends so (matplotlib picks the
format from the extension; a name without one is a PNG).

Panels: median S/N per fibre (fibres far below their neighbours stand out), a few
spectra with their 1-sigma band from IVAR, the CHI2PIX and MASK images over fibre x
wavelength, and, with a model image and the preproc image, the residual
(image - model) * sqrt(ivar) on the CCD. The title line gives the numbers that decide
health (masked bins, BAD2DFIT bins, fibres with no valid bin, median CHI2PIX) and a
verdict; the thresholds are in `health()`. Reading the frame needs numpy and fitsio;
drawing needs matplotlib too (the package's "qa" extra; Debian: python3-matplotlib):
without it `-o` is refused with a message saying how to install it, and the numbers
alone (no `-o`) still print.
"""
import argparse
import os
import sys
import tempfile
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


# ---------------------------------------------------------------- drawing (matplotlib)
# One Figure on the Agg canvas, without pyplot: no display, no global figure state, and
# savefig hands PDF and SVG to matplotlib's own backends. The look follows desispec's QA
# plots: a grid of plain matplotlib axes, "Fiber" and "Wavelength [Ang]" axes, colour bars.
WIDTH_IN, HEIGHT_IN, DPI = 16, 10, 100  # a 1600 x 1000 PNG
MASK_NAMES = ["good", "other", "SOMEBADPIX", "ALLBADPIX", "BAD2DFIT"]
MASK_COLOURS = ["#f0f0f0", "#999999", "#ffb000", "#d00000", "#7b2cbf"]
VERDICT_COLOURS = {"OK": "darkgreen", "CHECK": "firebrick"}
# An image panel is about 400 pixels wide on the page: larger images are reduced in blocks
# first (the worst value of a block, or its noise-normalised sum), so that a single bad bin
# or CCD pixel still shows instead of falling between the pixels matplotlib samples.
MAX_IMAGE = 400


class MatplotlibMissing(ImportError):
    """Drawing the page needs matplotlib, which is not importable."""


def _matplotlib():
    """(Figure, FigureCanvasAgg, colors) from matplotlib, or MatplotlibMissing saying how
    to install it."""
    try:
        from matplotlib import colors
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise MatplotlibMissing(
            f"drawing the QA page needs matplotlib ({e}): install Debian's python3-matplotlib, "
            "or the package's extra (pip install 'spexd[qa]')") from None
    return Figure, FigureCanvasAgg, colors


def block_factors(shape, limit=MAX_IMAGE):
    """Block size (rows, columns) that brings an image of shape within limit x limit."""
    return tuple(max(-(-n // limit), 1) for n in shape)


def blocks(a, factors, reduce, fill):
    """a reduced over blocks of factors (rows, columns) by reduce(..., axis=(1, 3)); the
    last blocks, where the shape is not a multiple, are padded with fill."""
    fy, fx = factors
    if fy == fx == 1:
        return a
    h, w = a.shape
    ny, nx = -(-h // fy), -(-w // fx)
    padded = np.full((ny * fy, nx * fx), fill, a.dtype)
    padded[:h, :w] = a
    return reduce(padded.reshape(ny, fy, nx, fx), axis=(1, 3))


def mask_classes(mask):
    """Each bin's worst MASK class, an index into MASK_NAMES (the classes go up in
    severity)."""
    cls = np.zeros(mask.shape, np.uint8)
    cls[mask != 0] = 1
    cls[(mask & SOMEBADPIX) != 0] = 2
    cls[(mask & ALLBADPIX) != 0] = 3
    cls[(mask & BAD2DFIT) != 0] = 4
    return cls


def _note(ax, text, line=0):
    ax.text(0.01, -0.16 - 0.07 * line, text, transform=ax.transAxes, fontsize=8, color="0.4",
            va="top")


def _block_note(ax, factors, what):
    fy, fx = factors
    if fy * fx > 1:
        _note(ax, f"each pixel: {what} of {fy} fibre(s) x {fx} bins")


def _snr_panel(ax, frame, snr):
    fibres = frame["fibermin"] + np.arange(len(snr))
    med = float(np.median(snr)) if len(snr) else 0.0
    low = snr < 0.5 * med
    ax.scatter(fibres[~low], snr[~low], s=8, color="C0", label="fibre")
    ax.scatter(fibres[low], snr[low], s=20, color="red", label="< half the median")
    ax.axhline(med, color="0.5", ls="--", lw=1, label=f"median {med:.1f}")
    ax.set_xlabel("Fiber")
    ax.set_ylabel("median S/N per bin")
    ax.set_title("median S/N per fibre (unmasked bins)")
    ax.set_ylim(0, 1.1 * max(float(np.max(snr)) if len(snr) else 0.0, 1e-9))
    ax.legend(fontsize=8, loc="best")


def _spectra_panel(ax, frame, snr):
    """Three fibres: the best, the median and the worst by S/N, offset for clarity."""
    order = np.argsort(snr)
    picks = sorted({int(order[-1]), int(order[len(order) // 2]), int(order[0])},
                   key=lambda i: -snr[i])
    wave, offset = frame["wave"], 0.0
    for k, i in enumerate(picks):
        flux, ivar = frame["flux"][i] + offset, frame["ivar"][i]
        colour = f"C{k}"
        sigma = 1 / np.sqrt(np.where(ivar > 0, ivar, 1))
        ax.fill_between(wave, flux - sigma, flux + sigma, where=ivar > 0, color=colour,
                        alpha=0.3, lw=0)
        ax.plot(wave, flux, color=colour, lw=0.7,
                label=f"fiber {frame['fibermin'] + i} (S/N {snr[i]:.1f})")
        bad = frame["mask"][i] != 0
        if bad.any():
            ax.plot(wave[bad], flux[bad], "x", color="red", ms=4)
        top = np.nanpercentile(frame["flux"][i], 99.5) if flux.size else 0.0
        offset += 1.2 * max(top, 1e-9)
    ax.set_xlim(wave[0], wave[-1])
    ax.set_xlabel("Wavelength [Ang]")
    ax.set_ylabel("flux [electron/Ang] (offset); band: 1 sigma")
    ax.set_title("spectra: best, median, worst S/N (x = masked bin)")
    ax.legend(fontsize=8, loc="upper right")


def _fibre_wave_image(fig, ax, frame, image, title, **style):
    wave, f0 = frame["wave"], frame["fibermin"]
    n = frame["flux"].shape[0]
    im = ax.imshow(image, origin="lower", aspect="auto", interpolation="nearest",
                   extent=(wave[0], wave[-1], f0 - 0.5, f0 + n - 0.5), **style)
    ax.set_xlabel("Wavelength [Ang]")
    ax.set_ylabel("Fiber")
    ax.set_title(title)
    return im, fig.colorbar(im, ax=ax)


def _chi2_panel(fig, ax, frame, colors):
    # In blocks, the largest value: a poor fit stays visible (NaN spreads to its block).
    factors = block_factors(frame["chi2pix"].shape)
    chi2 = blocks(np.clip(frame["chi2pix"], 1e-2, None), factors, np.max, -np.inf)
    vmax = max(100.0, float(np.max(frame["chi2pix"])))
    _, bar = _fibre_wave_image(fig, ax, frame, chi2, "CHI2PIX (log; ~1 is good)", cmap="magma",
                               norm=colors.LogNorm(0.1, vmax))
    bar.set_label("chi2 per pixel")
    _block_note(ax, factors, "the largest")


def _mask_panel(fig, ax, frame, colors):
    # In blocks, the worst class.
    factors = block_factors(frame["mask"].shape)
    cls = blocks(mask_classes(frame["mask"]), factors, np.max, 0)
    n = len(MASK_NAMES)
    _, bar = _fibre_wave_image(fig, ax, frame, cls, "MASK (light grey: good)",
                               cmap=colors.ListedColormap(MASK_COLOURS),
                               norm=colors.BoundaryNorm(np.arange(n + 1) - 0.5, n))
    bar.set_ticks(np.arange(n), labels=MASK_NAMES)
    _block_note(ax, factors, "the worst")


def _residual_panel(fig, ax, model_path, image_path, colors):
    res, (x0, y0) = residual_image(model_path, image_path)
    finite = np.isfinite(res)
    rms = np.sqrt(np.mean(res[finite] ** 2)) if finite.any() else float("nan")
    # In blocks, the sum over the block's valid pixels / sqrt(their number): still unit
    # variance where the model describes the pixels, and a systematic offset grows.
    factors = block_factors(res.shape)
    total = blocks(np.where(finite, res, 0.0), factors, np.sum, 0.0)
    count = blocks(finite.astype(np.int64), factors, np.sum, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shown = np.where(count > 0, total / np.sqrt(count), np.nan)
    cmap = colors.LinearSegmentedColormap.from_list("residual", ["#053061", "#4393c3", "#f7f7f7",
                                                                 "#d6604d", "#67001f"])
    cmap.set_bad("0.85")
    h, w = res.shape
    im = ax.imshow(shown, origin="lower", aspect="auto", interpolation="nearest", cmap=cmap,
                   vmin=-5, vmax=5, extent=(x0 - 0.5, x0 + w - 0.5, y0 - 0.5, y0 + h - 0.5))
    fig.colorbar(im, ax=ax).set_label("(image - model) / sigma")
    ax.set_xlabel("CCD x [pixel]")
    ax.set_ylabel("CCD y [pixel]")
    ax.set_title(f"(image - model)/sigma on the CCD, rms {rms:.2f}")
    # The model image is gpu_specter's A_core * (R-convolved flux) (extraction-spec
    # §2.11): blurred by R and again by the PSF, so bright lines leave +/- stripes
    # along the wavelength direction even in a healthy frame.
    _note(ax, "model = A R f as gpu_specter: bright lines leave stripes")
    fy, fx = factors
    if fy * fx > 1:
        _note(ax, f"each pixel: {fy} x {fx} CCD pixels, sum / sqrt(n)", line=1)


def figure(frame_path, model_path=None, image_path=None):
    """(the QA page as a matplotlib Figure on the Agg canvas, the verdict). Raises
    MatplotlibMissing without matplotlib."""
    Figure, FigureCanvasAgg, colors = _matplotlib()
    frame = read_frame(frame_path)
    snr = median_snr(frame["flux"], frame["ivar"], frame["mask"])
    verdict, problems, numbers = health(frame)
    nspec, nwave = frame["flux"].shape

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    lines = [
        f"{os.path.basename(frame_path)}  camera {frame['camera'] or '?'}  "
        f"{nspec} fibres x {nwave} bins  |  {verdict}"
        + (": " + "; ".join(problems) if problems else ""),
        f"median S/N {np.median(snr):.1f}   masked bins {100 * numbers['masked']:.2f}%   "
        f"BAD2DFIT {100 * numbers['bad2dfit']:.2f}%   "
        f"median CHI2PIX {numbers['median_chi2pix']:.2f}   "
        f"fibres without valid bins {numbers['dead_fibres']}",
    ] + server_qa_lines(frame["server_qa"])
    fig.suptitle("\n".join(lines), color=VERDICT_COLOURS[verdict], fontsize=13)

    # The rows in grids of their own: the spectra span two columns above, and columns shared
    # with the row below would widen the gaps there to match it.
    top, bottom = (row.subgridspec(1, 3) for row in fig.add_gridspec(2, 1))
    _snr_panel(fig.add_subplot(top[0, 0]), frame, snr)
    _spectra_panel(fig.add_subplot(top[0, 1:]), frame, snr)
    ax = fig.add_subplot(bottom[0, 0])
    if frame["chi2pix"] is not None:
        _chi2_panel(fig, ax, frame, colors)
    else:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no CHI2PIX HDU in the frame", ha="center", color="0.4")
    _mask_panel(fig, fig.add_subplot(bottom[0, 1]), frame, colors)
    ax = fig.add_subplot(bottom[0, 2])
    if model_path and image_path:
        _residual_panel(fig, ax, model_path, image_path, colors)
    else:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no model image given\n(--model MODEL --image PREPROC\n"
                "draws the residual (image - model)/sigma)", ha="center", va="center",
                color="0.4", fontsize=12)
    return fig, verdict


def output_format(path):
    """The format matplotlib writes for `path`: its extension, lower case, or "png"
    without one. ValueError for an extension matplotlib cannot write."""
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(str(path))[1][1:].lower() or "png"
    supported = FigureCanvasBase.get_supported_filetypes()
    if ext not in supported:
        raise ValueError(f"{path}: matplotlib writes {', '.join(sorted(supported))}, not {ext!r}")
    return ext


def draw(frame_path, out_path, model_path=None, image_path=None):
    """Writes the QA page of `frame_path` to `out_path` (1600 x 1000 pixels as a PNG; SVG,
    PDF or another matplotlib format by the extension), atomically (a temporary file in
    the same directory, then a rename). Returns the verdict."""
    _matplotlib()
    fmt = output_format(out_path)
    fig, verdict = figure(frame_path, model_path, image_path)
    fd, tmp = tempfile.mkstemp(prefix=".qa-", suffix="." + fmt,
                               dir=os.path.dirname(os.path.abspath(out_path)))
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=fmt)
        # mkstemp's file is private (0600); the page gets what the umask gives a new file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out_path)
    except BaseException:
        os.unlink(tmp)
        raise
    return verdict


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m spexd.qa", description=__doc__.split("\n")[0])
    ap.add_argument("frame", help="desispec frame file (spexctl, spexd or spexd.Client)")
    ap.add_argument("-o", "--output",
                    help="the page to write: PNG, or SVG or PDF by the extension, e.g. qa.png "
                         "(without it: the numbers only)")
    ap.add_argument("--model", help="model image (spexctl extract -m / want_model)")
    ap.add_argument("--image", help="the preproc file that was extracted (for the residual)")
    a = ap.parse_args(argv)
    if bool(a.model) != bool(a.image):
        ap.error("--model and --image go together")
    if a.output:
        try:
            _matplotlib()
            output_format(a.output)
        except (MatplotlibMissing, ValueError) as e:
            ap.error(f"-o {a.output}: {e}")
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
