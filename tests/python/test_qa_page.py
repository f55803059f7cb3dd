"""spexd.qa's page and the numbers it reads from a frame, its model and its preproc (no
server)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import support
from spexd import qa
from spexd.result import BAD2DFIT


@support.needs_matplotlib
class QaPageTest(unittest.TestCase):
    """spexd.qa on small frame, model and preproc files written here with fitsio: the
    numbers it reads back, the residual it forms and the page it draws."""

    NSPEC, NWAVE, FIBERMIN = 6, 200, 100

    def setUp(self):
        import fitsio
        from spexd.result import BAD2DFIT, SOMEBADPIX

        self.dir = tempfile.mkdtemp(prefix="spexd-qa-test-")
        self.addCleanup(shutil.rmtree, self.dir)
        rng = np.random.default_rng(5)
        shape = (self.NSPEC, self.NWAVE)
        self.flux = 100 + 10 * rng.standard_normal(shape)
        self.ivar = np.full(shape, 0.01)
        self.ivar[4] = 0  # a fibre without a valid bin
        self.mask = np.zeros(shape, np.uint32)
        self.mask[1, :7] = BAD2DFIT   # 7 of 1200 bins: 0.58 %
        self.mask[2, 10:40] = SOMEBADPIX
        self.chi2 = 0.5 + rng.random(shape)
        self.wave = 5760.0 + 0.8 * np.arange(self.NWAVE)
        self.frame = os.path.join(self.dir, "frame.fits")
        with fitsio.FITS(self.frame, "rw", clobber=True) as f:
            f.write(None)
            f.write(self.flux.astype(np.float32), extname="FLUX",
                    header={"FIBERMIN": self.FIBERMIN, "CAMERA": "b1", "SPXREQ": 42,
                            "SPXCOND": 12.5, "SPXBINS": self.mask.size})
            f.write(self.ivar.astype(np.float32), extname="IVAR")
            f.write(self.mask, extname="MASK")
            f.write(self.wave, extname="WAVELENGTH")
            f.write(self.chi2.astype(np.float32), extname="CHI2PIX")
        ccd = (60, 50)
        self.model = np.zeros(ccd)
        self.model[20:30, 10:40] = 5.0
        self.image = self.model + rng.standard_normal(ccd)
        self.image_ivar = np.full(ccd, 4.0)
        self.image_mask = np.zeros(ccd, np.int32)
        self.image_mask[25, 20] = 1
        self.model_path = os.path.join(self.dir, "model.fits")
        self.preproc = os.path.join(self.dir, "preproc.fits")
        with fitsio.FITS(self.model_path, "rw", clobber=True) as f:
            f.write(self.model.astype(np.float32))
        with fitsio.FITS(self.preproc, "rw", clobber=True) as f:
            f.write(None)
            f.write(self.image.astype(np.float32), extname="IMAGE")
            f.write(self.image_ivar.astype(np.float32), extname="IVAR")
            f.write(self.image_mask, extname="MASK")

    def test_frame_numbers(self):
        frame = qa.read_frame(self.frame)
        np.testing.assert_array_equal(frame["flux"], self.flux.astype(np.float32))
        np.testing.assert_array_equal(frame["mask"], self.mask)
        np.testing.assert_array_equal(frame["wave"], self.wave)
        self.assertEqual((frame["fibermin"], frame["camera"]), (self.FIBERMIN, "b1"))
        self.assertEqual(frame["server_qa"],
                         {"request_id": 42, "worst_condition": 12.5, "bins": 1200})
        verdict, problems, numbers = qa.health(frame)
        self.assertEqual(verdict, "CHECK")
        self.assertEqual(problems, ["1 fibres without a valid bin"])
        self.assertEqual(numbers["masked"], 37 / 1200)
        self.assertEqual(numbers["bad2dfit"], 7 / 1200)
        self.assertEqual(numbers["dead_fibres"], 1)
        self.assertAlmostEqual(numbers["median_chi2pix"],
                               float(np.median(self.chi2.astype(np.float32).astype(np.float64))),
                               places=12)

    def test_residual(self):
        res, (x0, y0) = qa.residual_image(self.model_path, self.preproc, margin=5)
        self.assertEqual((x0, y0), (5, 15))
        self.assertEqual(res.shape, (20, 40))  # rows 15..34, columns 5..44
        want = (self.image.astype(np.float32) - self.model)[15:35, 5:45] * 2.0
        want[25 - 15, 20 - 5] = np.nan  # the masked pixel
        np.testing.assert_allclose(res, want, rtol=0, atol=1e-12)

    def panels(self, fig):
        """The figure's axes by title (the colour bars' axes have none)."""
        return {ax.get_title(): ax for ax in fig.axes if ax.get_title()}

    def test_figure_carries_the_data(self):
        fig, verdict = qa.figure(self.frame, self.model_path, self.preproc)
        self.assertEqual(verdict, "CHECK")
        self.assertEqual(tuple(fig.get_size_inches() * fig.dpi), (1600, 1000))
        title = fig._suptitle
        self.assertEqual(title.get_text().split("\n")[0],
                         "frame.fits  camera b1  6 fibres x 200 bins  |  CHECK: "
                         "1 fibres without a valid bin")
        self.assertIn("\nserver QA (request 42): worst condition 12.5", title.get_text())
        self.assertEqual(title.get_color(), "firebrick")
        res, _ = qa.residual_image(self.model_path, self.preproc)
        rms = np.sqrt(np.nanmean(res ** 2))
        residual_title = f"(image - model)/sigma on the CCD, rms {rms:.2f}"
        axes = self.panels(fig)
        self.assertEqual(sorted(axes), sorted([
            "median S/N per fibre (unmasked bins)", "spectra: best, median, worst S/N (x = masked bin)",
            "CHI2PIX (log; ~1 is good)", "MASK (light grey: good)", residual_title]))

        # S/N per fibre: the dead fibre (104, S/N 0) among the red points below half the median.
        frame = qa.read_frame(self.frame)
        snr = qa.median_snr(frame["flux"], frame["ivar"], frame["mask"])
        fibres = self.FIBERMIN + np.arange(self.NSPEC)
        low = snr < 0.5 * np.median(snr)
        np.testing.assert_array_equal(fibres[low], [104])
        dots, red = axes["median S/N per fibre (unmasked bins)"].collections
        np.testing.assert_array_equal(dots.get_offsets(), np.c_[fibres[~low], snr[~low]])
        np.testing.assert_array_equal(red.get_offsets(), np.c_[fibres[low], snr[low]])

        # Spectra: the best, median and worst fibre, each line at its flux plus the offset.
        spectra = axes["spectra: best, median, worst S/N (x = masked bin)"]
        labelled = [ln for ln in spectra.lines if not ln.get_label().startswith("_")]
        order = np.argsort(snr)
        picks = sorted({order[-1], order[len(order) // 2], order[0]}, key=lambda i: -snr[i])
        self.assertEqual([ln.get_label() for ln in labelled],
                         [f"fiber {self.FIBERMIN + i} (S/N {snr[i]:.1f})" for i in picks])
        np.testing.assert_array_equal(labelled[0].get_xdata(), self.wave)
        np.testing.assert_array_equal(labelled[0].get_ydata(), frame["flux"][picks[0]])

        # CHI2PIX and MASK bin for bin (small enough for no blocks), fibre FIBERMIN at the
        # bottom row of the image (origin lower), wavelength along x.
        (chi2,) = axes["CHI2PIX (log; ~1 is good)"].images
        np.testing.assert_array_equal(chi2.get_array(), frame["chi2pix"])
        self.assertEqual((chi2.norm.vmin, chi2.norm.vmax, chi2.origin), (0.1, 100.0, "lower"))
        self.assertEqual(list(chi2.get_extent()), [self.wave[0], self.wave[-1], 99.5, 105.5])
        (mask,) = axes["MASK (light grey: good)"].images
        want = np.zeros((self.NSPEC, self.NWAVE), np.uint8)
        want[1, :7] = qa.MASK_NAMES.index("BAD2DFIT")
        want[2, 10:40] = qa.MASK_NAMES.index("SOMEBADPIX")
        np.testing.assert_array_equal(mask.get_array(), want)
        self.assertEqual(mask.cmap(mask.norm(4))[:3], (0x7b / 255, 0x2c / 255, 0xbf / 255))
        # The residual cut, pixel for pixel, the masked CCD pixel NaN, over +-5 sigma.
        (resid,) = axes[residual_title].images
        np.testing.assert_array_equal(resid.get_array().filled(np.nan), res)
        self.assertTrue(np.isnan(res[25, 20]))
        self.assertEqual((resid.norm.vmin, resid.norm.vmax), (-5, 5))

        # Without the model the residual panel says how to get it; the page is still drawn.
        fig, _ = qa.figure(self.frame)
        self.assertEqual(sum(len(ax.images) for ax in fig.axes), 2)
        self.assertIn("no model image given", "".join(t.get_text() for ax in fig.axes
                                                      for t in ax.texts))

    def test_png_page(self):
        from PIL import Image

        out = os.path.join(self.dir, "qa.png")
        proc = subprocess.run(
            [sys.executable, "-m", "spexd.qa", self.frame, "-o", out, "--model",
             self.model_path, "--image", self.preproc], capture_output=True, text=True,
            timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("server QA (request 42): worst condition 12.5", proc.stdout)
        self.assertIn(f"spexd.qa: {out} (CHECK)", proc.stdout)
        # Written through a private temporary file, then given the umask's mode.
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o666 & ~umask)
        with Image.open(out) as im:
            self.assertEqual((im.format, im.size), ("PNG", (1600, 1000)))
            rgb = np.asarray(im.convert("RGB")).astype(int)
        # Not blank: many colours (the images' colour maps), and the title in the verdict's
        # colour (firebrick for CHECK, no dark green) above the panels.
        self.assertGreater(len(np.unique(rgb.reshape(-1, 3), axis=0)), 500)

        def pixels(colour, rows):
            return np.count_nonzero((np.abs(rgb[rows] - colour) <= 8).all(axis=-1))

        self.assertGreater(pixels((178, 34, 34), slice(0, 100)), 200)
        self.assertEqual(pixels((0, 100, 0), slice(0, 1000)), 0)
        # BAD2DFIT's purple and SOMEBADPIX's amber on the MASK panel.
        self.assertGreater(pixels((0x7b, 0x2c, 0xbf), slice(500, 1000)), 50)
        self.assertGreater(pixels((0xff, 0xb0, 0x00), slice(500, 1000)), 50)

    def test_svg_and_pdf_by_extension_and_refusals(self):
        import xml.etree.ElementTree as ET

        svg, pdf = os.path.join(self.dir, "qa.svg"), os.path.join(self.dir, "QA.PDF")
        self.assertEqual(qa.draw(self.frame, svg, self.model_path, self.preproc), "CHECK")
        root = ET.parse(svg).getroot()
        self.assertEqual((root.tag, root.get("width"), root.get("height")),
                         ("{http://www.w3.org/2000/svg}svg", "1152pt", "720pt"))
        # The three images as embedded rasters (continuous colour bars may add theirs).
        self.assertGreaterEqual(len(root.findall(".//{http://www.w3.org/2000/svg}image")), 3)
        self.assertEqual(qa.draw(self.frame, pdf), "CHECK")
        with open(pdf, "rb") as f:
            data = f.read()
        self.assertTrue(data.startswith(b"%PDF-"))
        self.assertEqual(len(re.findall(rb"/Type /Page\b", data)), 1)
        # A format matplotlib does not write is refused before anything is read or written.
        proc = subprocess.run([sys.executable, "-m", "spexd.qa", self.frame, "-o",
                               os.path.join(self.dir, "qa.xyz")], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertRegex(proc.stderr, r"qa\.xyz: matplotlib writes .*png.*, not 'xyz'")
        with self.assertRaisesRegex(ValueError, "not 'xyz'"):
            qa.draw(self.frame, os.path.join(self.dir, "qa.xyz"))
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["QA.PDF", "frame.fits", "model.fits", "preproc.fits", "qa.svg"])

    def test_without_matplotlib(self):
        # matplotlib made unimportable: -o is refused saying what to install, nothing is
        # written, and the numbers alone still print.
        hide = ("import sys; sys.modules['matplotlib'] = None; from spexd import qa; "
                "sys.exit(qa.main(sys.argv[1:]))")
        out = os.path.join(self.dir, "qa.png")
        proc = subprocess.run([sys.executable, "-c", hide, self.frame, "-o", out],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("drawing the QA page needs matplotlib", proc.stderr)
        self.assertIn("python3-matplotlib", proc.stderr)
        self.assertIn("spexd[qa]", proc.stderr)
        self.assertFalse(os.path.exists(out))
        proc = subprocess.run([sys.executable, "-c", hide, self.frame], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"spexd.qa: {self.frame}: CHECK: 1 fibres without a valid bin",
                      proc.stdout)

    def test_full_frame_in_blocks(self):
        # 500 fibres x 2881 bins and a full CCD of residual: the images are shown in blocks
        # of at most 400 x 400, each block's worst CHI2PIX and MASK class, so that one bad
        # bin still shows; the residual's sum / sqrt(n).
        import fitsio

        rng = np.random.default_rng(9)
        shape, ccd = (500, 2881), (4128, 4114)
        frame = os.path.join(self.dir, "full-frame.fits")
        mask = np.zeros(shape, np.uint32)
        mask[333, 2000] = BAD2DFIT
        chi2 = (rng.chisquare(3, shape) / 3).astype(np.float32)
        chi2[17, 1234] = 5000.0
        with fitsio.FITS(frame, "rw", clobber=True) as f:
            f.write(None)
            f.write((100 + 10 * rng.standard_normal(shape)).astype(np.float32),
                    extname="FLUX", header={"FIBERMIN": 0, "CAMERA": "z0"})
            f.write(np.full(shape, 0.01, np.float32), extname="IVAR")
            f.write(mask, extname="MASK")
            f.write(7520.0 + 0.8 * np.arange(shape[1]), extname="WAVELENGTH")
            f.write(chi2, extname="CHI2PIX")
        model = (100 + 50 * rng.random(ccd)).astype(np.float32)
        model_path = os.path.join(self.dir, "full-model.fits")
        preproc = os.path.join(self.dir, "full-preproc.fits")
        with fitsio.FITS(model_path, "rw", clobber=True) as f:
            f.write(model)
        with fitsio.FITS(preproc, "rw", clobber=True) as f:
            f.write(None)
            f.write(model + rng.standard_normal(ccd).astype(np.float32), extname="IMAGE")
            f.write(np.ones(ccd, np.float32), extname="IVAR")
            f.write(np.zeros(ccd, np.int32), extname="MASK")
        del model
        fig, verdict = qa.figure(frame, model_path, preproc)
        self.assertEqual(verdict, "OK")
        axes = self.panels(fig)
        chi2_image = axes["CHI2PIX (log; ~1 is good)"].images[0].get_array()
        mask_image = axes["MASK (light grey: good)"].images[0].get_array()
        # ceil(500 / 400) = 2 fibres, ceil(2881 / 400) = 8 bins a block.
        self.assertEqual(chi2_image.shape, (250, 361))
        self.assertEqual(mask_image.shape, (250, 361))
        self.assertEqual(chi2_image[17 // 2, 1234 // 8], 5000.0)
        self.assertEqual(np.count_nonzero(mask_image), 1)
        self.assertEqual(mask_image[333 // 2, 2000 // 8], qa.MASK_NAMES.index("BAD2DFIT"))
        # 11 x 11 CCD pixels a block: ceil(4128 / 11) = 376, 4114 / 11 = 374; unit variance.
        shown = next(ax for title, ax in axes.items() if title.startswith("(image - model)"))
        res = shown.images[0].get_array()
        self.assertEqual(res.shape, (376, 374))
        self.assertAlmostEqual(float(np.std(res)), 1.0, delta=0.05)
        notes = [t.get_text() for t in shown.texts]
        self.assertIn("each pixel: 11 x 11 CCD pixels, sum / sqrt(n)", notes)
        mask_notes = [t.get_text() for t in axes["MASK (light grey: good)"].texts]
        self.assertEqual(mask_notes, ["each pixel: the worst of 2 fibre(s) x 8 bins"])
        out = os.path.join(self.dir, "full.png")
        self.assertEqual(qa.draw(frame, out, model_path, preproc), "OK")
        self.assertLess(os.path.getsize(out), 3_000_000)


if __name__ == "__main__":
    unittest.main()
