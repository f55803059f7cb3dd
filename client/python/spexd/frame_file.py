"""The desispec frame file of a result (the layout spexctl writes, core/frame/frame_writer.cc),
written with astropy, and the desispec.frame.Frame of a result.

HDUs: FLUX (primary, float32, the input's IMAGE header plus desispec's keywords),
IVAR (float32), MASK (uint32), WAVELENGTH (float64), RESOLUTION (float32), FIBERMAP (the
frame's rows), CHI2PIX (float32), SCORES (float64 RAW scores); CHECKSUM/DATASUM on each.
"""
import gzip
import io
import os
import platform
import tempfile
import warnings

import numpy as np

from spexd import __version__
from spexd.desi_conventions import environment_dependencies, shorten_path, warn_missing_frame_keys
from spexd.errors import DesispecUnavailable

# Structural cards that the input header must not override (as FitsFile::WriteCards).
_STRUCTURAL = ("SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT",
               "TFIELDS", "EXTNAME", "BSCALE", "BZERO", "CHECKSUM", "DATASUM", "END")


# FIBERMAP header keys that describe the table, not the exposure: desispec.io.util.addkeys
# leaves them out of the Table's meta (with any TTYPEn, TFORMn, TUNITn, TNULLn).
_TABLE_KEYS = ("EXTNAME", "COMMENT", "CHECKSUM", "DATASUM", "PCOUNT", "GCOUNT", "BITPIX",
               "NAXIS", "NAXIS1", "NAXIS2", "XTENSION", "TFIELDS", "SIMPLE")


def fibermap_rows(fibermap_fits, fibers):
    """The FIBERMAP rows of `fibers` (absolute fibre = row index) as an astropy Table whose
    meta holds the HDU's other keys (RA, MJD-OBS, ... of a -f fibermap), as
    desispec.io.read_fibermap returns it: write_frame puts them back in the header."""
    from astropy.io import fits
    from astropy.table import Table

    with fits.open(io.BytesIO(fibermap_fits), memmap=False) as f:
        hdu = f["FIBERMAP"]
        table = Table(hdu.data.copy())
        for key in hdu.header:
            if key and key not in _TABLE_KEYS and key not in table.meta and \
                    not key.startswith(("TTYPE", "TFORM", "TUNIT", "TNULL")):
                table.meta[key] = hdu.header[key]
    return table[np.asarray(fibers, dtype=np.int64)]


def _set_dependency(header, name, version):
    """desiutil.depend.setdep: update an existing DEPNAMnn entry, else the next free nn."""
    for i in range(100):
        nk, vk = f"DEPNAM{i:02d}", f"DEPVER{i:02d}"
        if nk in header and header[nk] != name:
            continue
        header[nk] = name
        header[vk] = version
        return


def dependencies():
    """(name, version) of the software that made and wrote a Python-written frame."""
    import astropy
    import google.protobuf
    import grpc

    return [("spexd", __version__), ("python", platform.python_version()),
            ("numpy", np.__version__), ("astropy", astropy.__version__),
            ("grpcio", grpc.__version__), ("protobuf", google.protobuf.__version__)]


def image_cards(records):
    """astropy Cards of the input image's header records (80-character cards, as the
    server sends them). A long-string value (a key card whose string ends in '&' and the
    CONTINUE cards after it) becomes one card with the whole value: astropy refuses a
    CONTINUE card on its own (VerifyError when writing)."""
    from astropy.io import fits

    text = "".join(r[:80].ljust(80) for r in records)
    return list(fits.Header.fromstring(text).cards) if text else []


def frame_header(result, extname="FLUX", qa_keywords=False):
    """The FLUX header in desi_extract_spectra's order (as core/frame/frame_writer.cc):
    the input's IMAGE cards, HELIOCOR, NSPEC .. IN_IMG, DEPNAMnn/DEPVERnn, ORIG_PSF,
    BUNIT, FIBERMIN; with qa_keywords, the server's QA (QA_KEYWORDS) after them."""
    from astropy.io import fits

    hdr = fits.Header()
    hdr["EXTNAME"] = extname  # where the input's EXTNAME was (desispec updates it in place)
    for card in image_cards(result.image_header):
        if card.keyword and not card.keyword.startswith(_STRUCTURAL):
            hdr.append(card, end=True)
    warn_missing_frame_keys(hdr, "spexd frame")
    h = result.header
    if getattr(h, "heliocor", 0.0) not in (0.0, 1.0):
        hdr["HELIOCOR"] = h.heliocor
    hdr["NSPEC"] = (result.nspec, "Number of spectra")
    hdr["WAVEMIN"] = (h.wavemin, "First wavelength [Angstroms]")
    hdr["WAVEMAX"] = (h.wavemax, "Last wavelength [Angstroms]")
    hdr["WAVESTEP"] = (h.wavestep, "Wavelength step size [Angstroms]")
    hdr["SPECTER"] = (__version__, "spexd version")
    hdr["IN_PSF"] = (shorten_path(result.in_psf or ""), "Input spectral PSF")
    hdr["IN_IMG"] = shorten_path(result.in_img or "")
    for name, version in dependencies() + environment_dependencies():
        _set_dependency(hdr, name, version)
    if h.orig_psf:
        hdr["ORIG_PSF"] = h.orig_psf
    hdr["BUNIT"] = "electron/Angstrom"
    hdr["FIBERMIN"] = result.specmin
    if qa_keywords:
        qa = getattr(result, "qa", None) or {}
        for key, (field, comment) in QA_KEYWORDS.items():
            if qa:
                hdr[key] = (qa[field], comment)
    return hdr


# The server's FrameQa (spexd.result.ExtractionResult.qa) in the FLUX header, so that
# `python3 -m spexd.qa` can show it from the file (docs/operations.md). Only on request
# (write(path, qa_keywords=True)): desispec writes no such keys, and the default file is
# desi_extract_spectra's, key for key (tests/python/test_desispec_dropin.py).
QA_KEYWORDS = {
    "SPXREQ": ("request_id", "spexd request id"),
    "SPXCOND": ("worst_condition", "spexd worst patch condition estimate"),
    "SPXCONDB": ("worst_condition_bundle", "spexd bundle of the worst condition"),
    "SPXRETRY": ("retried_patches", "spexd patches solved by the retry"),
    "SPXFAIL": ("failed_patches", "spexd patches failed after the retry"),
    "SPXBINS": ("bins", "spexd bins of the frame"),
    "SPXSBAD": ("somebadpix_bins", "spexd SOMEBADPIX bins"),
    "SPXABAD": ("allbadpix_bins", "spexd ALLBADPIX bins"),
    "SPXB2D": ("bad2dfit_bins", "spexd BAD2DFIT bins"),
    "SPXCHI2": ("median_chi2pix", "spexd median chi2pix (ivar > 0)"),
    "SPXSHADW": ("shadow_parity", "spexd shadow parity (blank: not sampled)"),
    "SPXSHADB": ("shadow_bundle", "spexd shadow parity bundle"),
}


def _fibermap_hdu(src, rows):
    """The frame's FIBERMAP rows with the source header's cards; strings NUL-padded, as
    desispec (astropy Table -> table_to_hdu) and spexctl write them."""
    from astropy.io import fits
    from astropy.table import Table

    hdu = fits.BinTableHDU(Table(rows), name="FIBERMAP")
    for card in src.header.cards:
        key = card.keyword
        if key.startswith(("TTYPE", "TFORM")) and key in hdu.header:
            if key.startswith("TTYPE") and card.comment:
                hdu.header.comments[key] = card.comment
        elif key and not key.startswith(_STRUCTURAL) and key not in hdu.header:
            hdu.header.append(card, end=True)
    # desispec writes the fibermap's header keys (its Table meta) before EXTNAME.
    del hdu.header["EXTNAME"]
    hdu.header["EXTNAME"] = "FIBERMAP"
    return hdu


def frame_hdus(result, qa_keywords=False):
    from astropy.io import fits

    flux = fits.PrimaryHDU(result.flux.astype(np.float32),
                           header=frame_header(result, qa_keywords=qa_keywords))
    hdus = [flux,
            fits.ImageHDU(result.ivar.astype(np.float32), name="IVAR"),
            fits.ImageHDU(result.mask.astype(np.uint32), name="MASK"),
            fits.ImageHDU(result.wave.astype(np.float64), name="WAVELENGTH")]
    hdus[-1].header["BUNIT"] = "Angstrom"
    hdus.append(fits.ImageHDU(result.resolution_data.astype(np.float32), name="RESOLUTION"))
    if result.header.fibermap_fits:
        with fits.open(io.BytesIO(bytes(result.header.fibermap_fits)), memmap=False) as f:
            src = f["FIBERMAP"]
            rows = src.data[np.asarray(result.fibers, dtype=np.int64)]
            hdus.append(_fibermap_hdu(src, rows))
    hdus.append(fits.ImageHDU(result.chi2pix.astype(np.float32), name="CHI2PIX"))
    scores, comments = result.scores
    if scores and getattr(result, "want_scores", True):
        cols = [fits.Column(name=k, format="D", array=v) for k, v in scores.items()]
        table = fits.BinTableHDU.from_columns(cols, name="SCORES")
        for i, name in enumerate(scores, start=1):
            table.header.comments[f"TTYPE{i}"] = comments[name]
        hdus.append(table)
    return fits.HDUList(hdus)


def _write_atomically(path, data):
    """A temporary file in the target directory, fsync, then rename over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def is_gzip_name(path):
    """Whether a FITS file named `path` is stored gzip-compressed: its name ends in ".gz",
    compared as written ("x.fits.GZ" is plain). The rule of the server, spexctl and
    core::IsGzipName (core/io/gzip_name.h); tests/data/gzip_names.tsv holds both to it."""
    return str(path).endswith(".gz")


def _encode(hdul, path):
    from astropy.io.fits.verify import VerifyWarning

    buf = io.BytesIO()
    with warnings.catch_warnings():
        # An input card at exactly 80 characters may re-format one longer: astropy then
        # shortens its comment, as CFITSIO does for spexctl's file. Not worth a warning.
        warnings.filterwarnings("ignore", "Card is too long", VerifyWarning)
        hdul.writeto(buf, checksum=True)
    data = buf.getvalue()
    if is_gzip_name(path):
        data = gzip.compress(data, mtime=0)
    return data


def write_frame(result, path, qa_keywords=False):
    _write_atomically(path, _encode(frame_hdus(result, qa_keywords), path))


def write_model(result, path):
    """The model image (float64, primary HDU IMAGE, as desispec) with the frame header."""
    from astropy.io import fits

    if result.model is None:
        raise ValueError("no model image: extract with want_model=True")
    hdu = fits.PrimaryHDU(result.model, header=frame_header(result, extname="IMAGE"))
    _write_atomically(path, _encode(fits.HDUList([hdu]), path))


def to_desispec(result):
    try:
        from desispec.frame import Frame
    except ImportError as e:
        raise DesispecUnavailable(
            "desispec is not importable (it is not packaged in Debian; "
            "scripts/desispec_stack.sh in spexd's sources sets it up from "
            "https://github.com/desihub, docs/desispec.md). Without it, "
            "result.write(path) still writes the desispec frame file, and the numpy arrays "
            f"are on the result. ({e})") from e
    # no_scores=True: no SCORES in the Frame either, so write_frame writes none (as desispec).
    scores, comments = result.scores if getattr(result, "want_scores", True) else ({}, {})
    return Frame(result.wave, result.flux, result.ivar, mask=result.mask,
                 resolution_data=result.resolution_data, fibers=result.fibers,
                 meta=frame_header(result), fibermap=result.fibermap,
                 chi2pix=result.chi2pix, scores=scores or None,
                 scores_comments=comments or None)
