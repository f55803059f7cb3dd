#!/usr/bin/python3
"""Writes the seeds the fuzz targets' corpora started from, and the request target's PSF
(data/). Seeds are cut from the test data: the PSF keeps 2 of its 500 fibres, the preproc
frames are tiny IMAGE/IVAR/MASK/FIBERMAP files in the layout of a DESI preproc file. Run
again only to change them: `scripts/fuzz.sh --merge` then keeps those that add coverage
to the committed corpus (named by their SHA-1 there).
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


class DeflateBits:
    """Deflate bits (RFC 1951 3.1.1): fields from their least significant bit, Huffman
    codes from their most significant bit."""

    def __init__(self):
        self.bits = []

    def field(self, value, n):
        self.bits += [(value >> i) & 1 for i in range(n)]

    def code(self, code, n):
        self.bits += [(code >> i) & 1 for i in reversed(range(n))]

    def take(self):
        self.bits += [0] * (-len(self.bits) % 8)
        out = bytes(sum(b << i for i, b in enumerate(self.bits[k:k + 8]))
                    for k in range(0, len(self.bits), 8))
        self.bits = []
        return out


def gzip_around(deflate, isize):
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + deflate + b"\0" * 4 + isize.to_bytes(4, "little")


def copy_flood_block_start():
    """A dynamic block where every 2 zero bits after its literal 0 are a 258-byte copy
    (as tests/core/io/gzip_test_bytes.h CopyFloodBlockStart)."""
    b = DeflateBits()
    b.field(0, 1); b.field(2, 2); b.field(29, 5); b.field(1, 5); b.field(14, 4)
    for sym in (16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1):
        b.field(1 if sym == 18 else 2 if sym in (1, 2) else 0, 3)
    def zeros(n):
        b.code(0, 1); b.field(n - 11, 7)
    b.code(3, 2); zeros(138); zeros(117); b.code(3, 2); zeros(28)
    b.code(2, 2); b.code(2, 2); b.code(2, 2)
    b.code(2, 2)  # the literal 0
    return b.take()


def hostile_gzip_seeds():
    """The crafted streams of the gzip tests (tests/core/io/gzip_hostile_test.cc), cut to the
    fuzzer's 64 KiB: empty stored blocks with an invalid block every 8 KiB, and 258-byte
    copies from every 2 zero bits (alone, and as the data behind a FITS header)."""
    flood = b""
    while len(flood) < 40000:
        flood += b"\x00\x00\x00\xff\xff" * 1638 + b"\x07"
    (corpus / "gzip" / "stored-block-flood").write_bytes(gzip_around(flood, 0xFFFFFFFF))
    start = copy_flood_block_start()
    copies = b"".join(start + b"\0" * 16384 for _ in range(3))
    (corpus / "gzip" / "copy-flood").write_bytes(gzip_around(copies, 16 * 60000))
    card = lambda k, v: (k.ljust(8) + "= " + v.rjust(20)).ljust(80)
    header = (card("SIMPLE", "T") + card("BITPIX", "-32") + card("NAXIS", "2") +
              card("NAXIS1", "256") + card("NAXIS2", "256") + "END".ljust(80)).ljust(2880).encode()
    stored = b"\0" + len(header).to_bytes(2, "little") + (0xFFFF ^ len(header)).to_bytes(2, "little")
    (corpus / "gzip" / "copy-flood-fits").write_bytes(
        gzip_around(stored + header + start + b"\0" * 8192, 0))


def main():
    # The request target's PSF: two bundles of 25 fibres, a tenth of a camera's planning work.
    small_psf(50).writeto(here / "data" / "psf-r0-50fibres.fits", overwrite=True)
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
    hostile_gzip_seeds()


main()
