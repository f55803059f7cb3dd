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

import numpy as np

from spexd.frame_file import QA_KEYWORDS
from spexd.result import ALLBADPIX, BAD2DFIT, SOMEBADPIX


def read_frame(path):
    """The arrays of a desispec frame file (spexctl's, the server's or the client's)."""
    from astropy.io import fits

    with fits.open(path, memmap=False) as f:
        hdr = f["FLUX"].header
        frame = {
            "flux": f["FLUX"].data.astype(np.float64),
            "ivar": f["IVAR"].data.astype(np.float64),
            "mask": f["MASK"].data.astype(np.uint32),
            "wave": f["WAVELENGTH"].data.astype(np.float64),
            "chi2pix": f["CHI2PIX"].data.astype(np.float64) if "CHI2PIX" in f else None,
            "fibermin": int(hdr.get("FIBERMIN", 0)),
            "camera": str(hdr.get("CAMERA", "")),
            "expid": hdr.get("EXPID", ""),
            # The server's numerical health, when the file carries it (frame_file.QA_KEYWORDS).
            "server_qa": {field: hdr[key] for key, (field, _) in QA_KEYWORDS.items() if key in hdr},
        }
    return frame


def median_snr(flux, ivar, mask):
    """Median of flux * sqrt(ivar) over the unmasked bins with ivar > 0, per fibre."""
    good = (ivar > 0) & (mask == 0)
    snr = np.where(good, flux * np.sqrt(np.where(good, ivar, 0)), np.nan)
    with np.errstate(all="ignore"):
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
    from astropy.io import fits

    with fits.open(model_path, memmap=False) as m:
        model = m[0].data.astype(np.float64)
    with fits.open(image_path, memmap=False) as p:
        image = p["IMAGE"].data.astype(np.float64)
        ivar = p["IVAR"].data.astype(np.float64)
        mask = p["MASK"].data if "MASK" in p else np.zeros(image.shape, np.int32)
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


def _spectra_panel(ax, frame, snr):
    """Three fibres: the best, the median and the worst by S/N, offset for clarity."""
    order = np.argsort(snr)
    picks = sorted({int(order[-1]), int(order[len(order) // 2]), int(order[0])},
                   key=lambda i: -snr[i])
    wave = frame["wave"]
    offset = 0.0
    for i in picks:
        flux, ivar = frame["flux"][i], frame["ivar"][i]
        sigma = np.where(ivar > 0, 1 / np.sqrt(np.where(ivar > 0, ivar, 1)), np.nan)
        line, = ax.plot(wave, flux + offset, lw=0.6,
                        label=f"fibre {frame['fibermin'] + i} (S/N {snr[i]:.1f})")
        ax.fill_between(wave, flux + offset - sigma, flux + offset + sigma,
                        color=line.get_color(), alpha=0.3, lw=0)
        bad = frame["mask"][i] != 0
        if bad.any():
            ax.plot(wave[bad], flux[bad] + offset, "x", color="red", ms=3)
        top = np.nanpercentile(flux, 99.5) if flux.size else 0
        offset += 1.2 * max(top, 1e-9)
    ax.set_xlabel("wavelength [A]")
    ax.set_ylabel("flux [electron/A] (offset), band: 1 sigma from IVAR")
    ax.set_title("spectra: best, median, worst S/N (x = masked bin)")
    ax.legend(fontsize=7, loc="upper right")


def _fibre_wave_image(ax, fig, data, frame, title, **kw):
    wave, f0 = frame["wave"], frame["fibermin"]
    extent = [wave[0], wave[-1], f0 - 0.5, f0 + data.shape[0] - 0.5]
    im = ax.imshow(data, aspect="auto", origin="lower", extent=extent,
                   interpolation="nearest", **kw)
    ax.set_xlabel("wavelength [A]")
    ax.set_ylabel("fibre")
    ax.set_title(title)
    return im


def draw(frame_path, out_path, model_path=None, image_path=None):
    """Writes the QA page of `frame_path` to `out_path` (PNG, 1600 x 1000 pixels)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap, LogNorm

    frame = read_frame(frame_path)
    snr = median_snr(frame["flux"], frame["ivar"], frame["mask"])
    verdict, problems, numbers = health(frame)
    nspec, nwave = frame["flux"].shape
    fibres = frame["fibermin"] + np.arange(nspec)

    fig = plt.figure(figsize=(16, 10), dpi=100)
    grid = fig.add_gridspec(2, 3, hspace=0.35, wspace=0.3)
    colour = "darkgreen" if verdict == "OK" else "firebrick"
    fig.suptitle(
        f"{os.path.basename(frame_path)}  camera {frame['camera'] or '?'}  "
        f"{nspec} fibres x {nwave} bins  |  {verdict}"
        + (": " + "; ".join(problems) if problems else "") + "\n"
        f"median S/N {np.median(snr):.1f}   masked bins {100 * numbers['masked']:.2f}%   "
        f"BAD2DFIT {100 * numbers['bad2dfit']:.2f}%   "
        f"median CHI2PIX {numbers['median_chi2pix']:.2f}   "
        f"fibres without valid bins {numbers['dead_fibres']}"
        + "".join("\n" + line for line in server_qa_lines(frame["server_qa"])),
        color=colour, fontsize=13)

    ax = fig.add_subplot(grid[0, 0])
    low = snr < 0.5 * np.median(snr) if nspec else np.zeros(0, bool)
    ax.plot(fibres[~low], snr[~low], ".", color="tab:blue", label="fibre")
    ax.plot(fibres[low], snr[low], "o", color="red", label="< half the median")
    ax.axhline(np.median(snr) if nspec else 0, color="grey", lw=0.8, ls="--",
               label="median")
    ax.set_xlabel("fibre")
    ax.set_ylabel("median S/N per bin")
    ax.set_title("median S/N per fibre (unmasked bins)")
    ax.legend(fontsize=7)

    _spectra_panel(fig.add_subplot(grid[0, 1:]), frame, snr)

    ax = fig.add_subplot(grid[1, 0])
    if frame["chi2pix"] is not None:
        chi2 = np.clip(frame["chi2pix"], 1e-2, None)
        im = _fibre_wave_image(ax, fig, chi2, frame, "CHI2PIX (log; ~1 is good)",
                               norm=LogNorm(vmin=0.1, vmax=max(100.0, chi2.max())),
                               cmap="magma")
        fig.colorbar(im, ax=ax)

    ax = fig.add_subplot(grid[1, 1])
    m = frame["mask"]
    cls = np.zeros(m.shape, np.int8)  # 0 good, 1 other bits, 2 SOMEBADPIX, 3 ALLBADPIX, 4 BAD2DFIT
    cls[m != 0] = 1
    cls[(m & SOMEBADPIX) != 0] = 2
    cls[(m & ALLBADPIX) != 0] = 3
    cls[(m & BAD2DFIT) != 0] = 4
    cmap = ListedColormap(["#f0f0f0", "#999999", "#ffb000", "#d00000", "#7b2cbf"])
    im = _fibre_wave_image(ax, fig, cls, frame, "MASK (white: good)", cmap=cmap,
                           norm=BoundaryNorm(np.arange(-0.5, 5.5), cmap.N))
    bar = fig.colorbar(im, ax=ax, ticks=range(5))
    bar.ax.set_yticklabels(["good", "other", "SOMEBADPIX", "ALLBADPIX", "BAD2DFIT"],
                           fontsize=7)

    ax = fig.add_subplot(grid[1, 2])
    if model_path and image_path:
        res, (x0, y0) = residual_image(model_path, image_path)
        extent = [x0 - 0.5, x0 + res.shape[1] - 0.5, y0 - 0.5, y0 + res.shape[0] - 0.5]
        im = ax.imshow(res, origin="lower", cmap="RdBu_r", vmin=-5, vmax=5, extent=extent,
                       interpolation="nearest", aspect="auto")
        fig.colorbar(im, ax=ax, label="sigma")
        finite = res[np.isfinite(res)]
        rms = np.sqrt(np.mean(finite ** 2)) if finite.size else float("nan")
        # The model image is gpu_specter's A_core * (R-convolved flux) (extraction-spec
        # §2.11): blurred by R and again by the PSF, so bright lines leave +/- stripes
        # along the wavelength direction even in a healthy frame.
        ax.set_title(f"(image - model)/sigma on the CCD, rms {rms:.2f}\n"
                     "(model = A R f as gpu_specter: bright lines leave stripes)", fontsize=10)
        ax.set_xlabel("CCD x")
        ax.set_ylabel("CCD y")
    else:
        ax.axis("off")
        ax.text(0.5, 0.5, "no model image given\n(--model MODEL --image PREPROC\n"
                "draws the residual (image - model)/sigma)", ha="center", va="center",
                fontsize=11, color="grey", transform=ax.transAxes)
    fig.savefig(out_path, dpi=100)
    plt.close(fig)
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
