#!/usr/bin/python3
"""Writes the small seed corpora of the fuzz targets (committed; run again only to change
them). Seeds are cut from the test data: the PSF keeps 2 of its 500 fibres, the preproc
frames are tiny IMAGE/IVAR/MASK/FIBERMAP files in the layout of a DESI preproc file.
Needs Debian's python3-astropy: run with /usr/bin/python3."""
import pathlib
import numpy as np
from astropy.io import fits

here = pathlib.Path(__file__).resolve().parent
corpus = here / "corpus"
data = here.parent / "data"


def small_psf(nfib):
    src = fits.open(data / "psf-r0-00051060.fits")
    out = fits.HDUList()
    for i, name in enumerate(("XTRACE", "YTRACE")):
        h = src[name].header.copy()
        h["FIBERMAX"] = h["FIBERMIN"] + nfib - 1
        arr = src[name].data[:nfib].copy()
        hdu = (fits.PrimaryHDU if i == 0 else fits.ImageHDU)(arr, header=h)
        out.append(hdu)
    t = src["PSF"]
    legdeg1 = t.data["COEFF"].shape[-1]
    coeff = t.data["COEFF"][:, :nfib, :].copy()
    cols = [fits.Column(name="PARAM", format="8A", array=t.data["PARAM"]),
            fits.Column(name="COEFF", format=f"{nfib * legdeg1}D", dim=f"({legdeg1}, {nfib})",
                        array=coeff),
            fits.Column(name="LEGDEGX", format="J", array=t.data["LEGDEGX"]),
            fits.Column(name="LEGDEGW", format="J", array=t.data["LEGDEGW"])]
    h = t.header.copy()
    for k in list(h.keys()):
        if k.startswith(("TTYPE", "TFORM", "TDIM", "NAXIS", "TFIELDS", "PCOUNT", "GCOUNT")):
            del h[k]
    h["FIBERMAX"] = h.get("FIBERMIN", 0) + nfib - 1
    h.remove("COMMENT", remove_all=True)
    out.append(fits.BinTableHDU.from_columns(cols, header=h, name="PSF"))
    return out


def small_preproc(ny, nx, compressed_mask, with_fibermap, dtype, mask_codec="GZIP_1"):
    rng = np.random.default_rng(7)
    image = rng.normal(10, 3, (ny, nx)).astype(dtype)
    ivar = np.full((ny, nx), 0.1, dtype)
    ivar[1, 2] = -1
    image[2, 3] = np.nan
    mask = np.zeros((ny, nx), np.int32)
    mask[0, 1] = 1
    mask[3, 3] = 0x400
    hdus = [fits.PrimaryHDU(),
            fits.ImageHDU(image, name="IMAGE"),
            fits.ImageHDU(ivar, name="IVAR")]
    hdus[1].header["CAMERA"] = "r0"
    hdus[1].header["EXPID"] = 51060
    if compressed_mask:
        # desispec writes CompImageHDU(mask.astype(int16)): astropy's default, RICE_1.
        m = mask.astype(np.int16) if mask_codec == "RICE_1" else mask
        hdus.append(fits.CompImageHDU(m, name="MASK", compression_type=mask_codec))
    else:
        hdus.append(fits.ImageHDU(mask.astype(np.int16), name="MASK"))
    if with_fibermap:
        cols = [fits.Column(name="FIBER", format="J", array=np.arange(3)),
                fits.Column(name="TARGETID", format="K", array=np.arange(3) + 1000),
                fits.Column(name="OBJTYPE", format="3A", array=["TGT", "SKY", "TGT"])]
        hdus.append(fits.BinTableHDU.from_columns(cols, name="FIBERMAP"))
    return fits.HDUList(hdus)


def main():
    small_psf(2).writeto(corpus / "psf" / "psf-r0-2fibres.fits", overwrite=True)
    small_psf(1).writeto(corpus / "psf" / "psf-r0-1fibre.fits", overwrite=True)
    small_preproc(6, 5, False, True, np.float32).writeto(
        corpus / "preproc" / "preproc-f32-fibermap.fits", overwrite=True)
    small_preproc(4, 7, True, False, np.float64).writeto(
        corpus / "preproc" / "preproc-f64-compressed-mask.fits", overwrite=True)
    small_preproc(6, 5, True, True, np.float32, "RICE_1").writeto(
        corpus / "compressed" / "preproc-astropy-rice-mask.fits", overwrite=True)
    (corpus / "config" / "basic.conf").write_text(
        "# spexd config\nlisten = 127.0.0.1:50051\n--workers=2\nqueue-depth = 8  # inline\n"
        "data_roots = /data:/scratch\n\nlog_level = info\n")
    (corpus / "config" / "bad.conf").write_text("workers\n= 3\nkey=\n")


main()
