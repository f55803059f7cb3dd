"""Building extraction requests: parameters, the header, and the preproc upload.

An upload is a DESI preproc FITS file (IMAGE, IVAR, MASK, FIBERMAP), the server's only
upload format, so numpy arrays are written into one in memory (astropy) first.
"""
import io
import os

import numpy as np

from spexd.v1 import spexd_pb2 as pb

# reproduce= (which gpu_specter path's results, extraction-spec §2.17) travels as the
# proto's compat field; "gpu"/"cpu" are the deprecated spellings of compat=.
_REPRODUCE = {None: pb.COMPAT_UNSPECIFIED, "gpu_specter_gpu": pb.COMPAT_GPU,
              "gpu_specter_cpu": pb.COMPAT_CPU, "gpu": pb.COMPAT_GPU, "cpu": pb.COMPAT_CPU}
_MASK_POLICY = {None: pb.MASK_POLICY_UNSPECIFIED, "desispec": pb.MASK_POLICY_DESISPEC,
                "any": pb.MASK_POLICY_ANY_BIT, "desispec-exact": pb.MASK_POLICY_DESISPEC_EXACT}
_PRIORITY = {None: pb.PRIORITY_UNSPECIFIED, "realtime": pb.REALTIME,
             "reprocessing": pb.REPROCESSING}
_CHECKSUM = {None: pb.FILE_CHECKSUM_UNSPECIFIED, "sha256": pb.FILE_CHECKSUM_SHA256,
             "crc32": pb.FILE_CHECKSUM_CRC32}


def _choice(table, value, what):
    try:
        return table[value]
    except KeyError:
        raise ValueError(f"{what} must be one of {[k for k in table if k]}, not {value!r}") \
            from None


def extraction_params(wavelength=None, specmin=None, nspec=None, bundlesize=None,
                      nsubbundles=None, nwavestep=None, wavepad=None, wavepad_frac=None,
                      pixpad_frac=None, regularize=None, psferr=None, reproduce=None,
                      mask_policy=None, compat=None, barycentric_correction=False,
                      no_scores=False):
    """desi_extract_spectra's parameters; None leaves the server's default. compat= is
    the deprecated spelling of reproduce= (docs/service.md, "Option names")."""
    from spexd._channel import renamed

    reproduce = renamed(reproduce, compat, "reproduce", "compat")
    p = pb.ExtractionParams()
    if wavelength is not None:
        if len(wavelength) != 3:
            raise ValueError("wavelength must be (wmin, wmax, dw)")
        p.wmin, p.wmax, p.dw = (float(v) for v in wavelength)
    for name, value in (("specmin", specmin), ("nspec", nspec), ("bundlesize", bundlesize),
                        ("nsubbundles", nsubbundles), ("nwavestep", nwavestep),
                        ("wavepad", wavepad)):
        if value is not None:
            setattr(p, name, int(value))
    for name, value in (("wavepad_frac", wavepad_frac), ("pixpad_frac", pixpad_frac),
                        ("regularize", regularize), ("psferr", psferr)):
        if value is not None:
            setattr(p, name, float(value))
    p.compat = _choice(_REPRODUCE, reproduce, "reproduce")
    p.mask_policy = _choice(_MASK_POLICY, mask_policy, "mask_policy")
    p.barycentric_correction = bool(barycentric_correction)
    p.no_scores = bool(no_scores)
    return p


def fibermap_file_bytes(path):
    """desi_extract_spectra -f: the FIBERMAP HDU of a fibermap file, as a small FITS file
    (what ExtractHeader.fibermap_fits carries)."""
    from astropy.io import fits

    with fits.open(path, memmap=False) as f:
        if "FIBERMAP" not in f:
            raise ValueError(f"{path}: no FIBERMAP HDU")
        buf = io.BytesIO()
        fits.HDUList([fits.PrimaryHDU(), f["FIBERMAP"].copy()]).writeto(buf)
    return buf.getvalue()


def extract_header(psf_id, params, server_path=None, upload_size=None, priority=None,
                   want_model=False, server_output_path=None, bundles=None, fibers=None,
                   in_img_name=None, in_psf_name=None, client_tag=None, fibermap_fits=None,
                   server_model_path=None, overwrite=False, results_to_file_only=False,
                   float32=False, output_checksum=None):
    # want_frame_products: the specmask and RAW scores come from the server (core
    # computes them), for every stream that carries arrays.
    h = pb.ExtractHeader(psf_id=psf_id, params=params,
                         priority=_choice(_PRIORITY, priority, "priority"),
                         want_model=bool(want_model),
                         output_checksum=_choice(_CHECKSUM, output_checksum, "output_checksum"))
    if server_path is not None:
        h.server_path = server_path
    else:
        h.upload_size = upload_size
    if server_output_path:
        h.server_output_path = os.fspath(server_output_path)
    if server_model_path:
        h.server_model_path = os.fspath(server_model_path)
    h.overwrite = bool(overwrite)
    h.results_to_file_only = bool(results_to_file_only)
    h.want_frame_products = not results_to_file_only
    if float32:
        h.array_precision = pb.ARRAY_FLOAT32
    h.bundles.extend(int(b) for b in (bundles or ()))
    h.fibers.extend(int(f) for f in (fibers or ()))
    if in_img_name:
        h.in_img_name = in_img_name
    if in_psf_name:
        h.in_psf_name = in_psf_name
    if client_tag:
        h.client_tag = client_tag
    if fibermap_fits:
        h.fibermap_fits = fibermap_fits
    return h


# The array types a FITS image holds (BITPIX 8, 16, 32, 64, -32, -64; unsigned through
# BZERO): anything else (complex, bool, float16, strings, objects) has no FITS image type.
_FITS_IMAGE_DTYPES = ("uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                      "float32", "float64")


def _image_array(name, value):
    """`value` as an array FITS can store as an image, else a TypeError naming `name`."""
    array = np.asarray(value)
    kind = array.dtype.kind
    if kind == "c":
        raise TypeError(f"{name} is a complex array ({array.dtype}): a preproc image holds real "
                        "numbers (float32 or float64)")
    if array.dtype.name not in _FITS_IMAGE_DTYPES:
        raise TypeError(f"{name} is a {array.dtype} array, which FITS cannot store as an image: "
                        f"use one of {', '.join(_FITS_IMAGE_DTYPES)}")
    return array


def preproc_fits_bytes(image, ivar, mask=None, fibermap=None, header=None, flavor=None,
                       camera=None):
    """A preproc FITS file in memory from numpy arrays.

    image, ivar: 2-D arrays of one shape (their dtype is kept: a float32 image arrives
    at the server with the same values); mask: integer array of that shape (uint16/int32)
    or None; fibermap: astropy Table / numpy structured array or None; header: astropy
    Header or dict of cards for the IMAGE HDU (copied into the frame header); flavor,
    camera: FLAVOR / CAMERA for that header (desispec's write_frame needs both: a warning
    says so when they are absent).
    """
    from spexd.desi_conventions import warn_missing_frame_keys

    from astropy.io import fits
    from astropy.table import Table

    image = _image_array("image", image)
    ivar = _image_array("ivar", ivar)
    if image.ndim != 2 or ivar.shape != image.shape:
        raise ValueError(f"image and ivar must be 2-D of one shape (got {image.shape} and "
                         f"{ivar.shape})")
    hdr = fits.Header(header) if header is not None else fits.Header()
    if flavor is not None:
        hdr["FLAVOR"] = str(flavor)
    if camera is not None:
        hdr["CAMERA"] = str(camera)
    warn_missing_frame_keys(hdr, "spexd upload")
    primary = fits.PrimaryHDU(image, header=hdr)
    primary.header["EXTNAME"] = "IMAGE"
    hdus = [primary, fits.ImageHDU(ivar, name="IVAR")]
    if mask is not None:
        mask = _image_array("mask", mask)
        if mask.shape != image.shape or mask.dtype.kind not in "iu":
            raise ValueError("mask must be an integer array of the image's shape")
        hdus.append(fits.ImageHDU(mask, name="MASK"))
    if fibermap is not None:
        hdus.append(fits.BinTableHDU(Table(fibermap), name="FIBERMAP"))
    buf = io.BytesIO()
    fits.HDUList(hdus).writeto(buf)
    return buf.getvalue()


def read_preproc(path):
    """(image, ivar, mask, fibermap, header) of a preproc file, as the arrays to upload."""
    from astropy.io import fits
    from astropy.table import Table

    with fits.open(path, memmap=False) as f:
        image = f["IMAGE"].data.copy()
        header = f["IMAGE"].header.copy()
        ivar = f["IVAR"].data.copy()
        mask = f["MASK"].data.copy() if "MASK" in f else None
        fibermap = Table(f["FIBERMAP"].data.copy()) if "FIBERMAP" in f else None
    for key in ("XTENSION", "PCOUNT", "GCOUNT", "EXTNAME", "CHECKSUM", "DATASUM"):
        header.remove(key, ignore_missing=True)
    return image, ivar, mask, fibermap, header


def request_messages(header, upload):
    """The client stream: the header, then the upload in chunks."""
    from spexd._channel import UPLOAD_CHUNK_BYTES

    yield pb.ExtractRequest(header=header)
    if upload is not None:
        view = memoryview(upload)
        for off in range(0, len(upload), UPLOAD_CHUNK_BYTES):
            yield pb.ExtractRequest(chunk=pb.UploadChunk(data=bytes(view[off:off + UPLOAD_CHUNK_BYTES])))
