"""Package-level checks that need no server: version, errors, desispec, health rules."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np

import spexd
import svg_page
from spexd import qa, svg_draw


class PackageTest(unittest.TestCase):
    def test_version_matches_the_cpp_one(self):
        src = os.environ.get("SPEXD_SOURCE_DIR", "")
        with open(os.path.join(src, "core", "base", "version.h")) as f:
            cpp = re.search(r'kSpexdVersion = "([^"]+)"', f.read()).group(1)
        self.assertEqual(spexd.__version__, cpp)

    def test_errors_carry_code_and_message(self):
        class FakeRpcError(grpc.RpcError):
            def code(self):
                return grpc.StatusCode.RESOURCE_EXHAUSTED

            def details(self):
                return "queue full"

        err = spexd.errors.from_rpc_error(FakeRpcError())
        self.assertIsInstance(err, spexd.ResourceExhausted)
        self.assertEqual(err.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(err.details, "queue full")
        self.assertIn("queue full", str(err))

    def test_arrays_fits_cannot_hold_are_refused_by_type(self):
        # Complex, object, bool, float16 and string arrays: astropy raised a bare KeyError
        # of the dtype's name; the upload is refused naming the array and what it holds.
        from spexd import request

        good = np.ones((4, 5))
        for bad in (np.ones((4, 5), np.complex128), np.ones((4, 5), object),
                    np.ones((4, 5), bool), np.ones((4, 5), np.float16),
                    np.full((4, 5), "x")):
            for name, args in (("image", (bad, good)), ("ivar", (good, bad))):
                with self.subTest(dtype=str(bad.dtype), array=name):
                    with self.assertRaises(TypeError) as caught:
                        request.preproc_fits_bytes(*args)
                    self.assertIn(name, str(caught.exception))
                    self.assertIn(str(bad.dtype), str(caught.exception))
        with self.assertRaisesRegex(TypeError, "complex"):
            spexd.client.ExtractSpec(image=np.ones((4, 5), complex), ivar=good, psf_id="x")
        with self.assertRaisesRegex(TypeError, "mask"):
            request.preproc_fits_bytes(good, good, mask=np.ones((4, 5), object))
        for dtype in ("float32", "float64", "int16", "uint16"):  # still taken
            self.assertTrue(request.preproc_fits_bytes(good.astype(dtype), good))

    def test_queue_full_is_retried_within_its_window_only(self):
        from spexd import _channel

        class Refusal(grpc.RpcError):
            def __init__(self, code, trailing=()):
                self._code, self._trailing = code, trailing

            def code(self):
                return self._code

            def trailing_metadata(self):
                return self._trailing

        full = Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, (("spexd-retryable", "queue-full"),))
        too_big = Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED)
        policy = _channel.Policy(retries=4, queue_wait=5.0, initial_backoff=0.2, max_backoff=1.0)
        r = _channel.Retrier(policy)
        self.assertIsNone(r.pause(too_big))  # never fits: not retried
        # Queue full: retried past the UNAVAILABLE attempt count (4), pauses jittered to
        # 50-100 % of a doubling backoff capped at max_backoff.
        pauses = [r.pause(full) for _ in range(6)]
        self.assertTrue(all(p is not None for p in pauses), pauses)
        self.assertTrue(0.1 <= pauses[0] <= 0.2 and 0.5 <= pauses[5] <= 1.0, pauses)
        # The window bounds the total wait: a retrier started long ago gives up.
        r._start -= 10.0
        self.assertIsNone(r.pause(full))
        # The extraction deadline bounds the window too; retries=1 turns it off.
        r = _channel.Retrier(_channel.Policy(retries=4, extract_deadline=0.05))
        self.assertIsNone(r.pause(full))
        self.assertIsNone(_channel.Retrier(_channel.Policy(retries=1)).pause(full))
        # UNAVAILABLE keeps its attempt count: retries - 1 pauses.
        r = _channel.Retrier(_channel.Policy(retries=3))
        down = Refusal(grpc.StatusCode.UNAVAILABLE)
        self.assertEqual([r.pause(down) is not None for _ in range(3)], [True, True, False])

    def test_to_desispec_says_when_desispec_is_missing(self):
        try:
            import desispec  # noqa: F401
        except ImportError:
            pass
        else:
            self.skipTest("desispec is installed: to_desispec is exercised for real")
        r = spexd.ExtractionResult.__new__(spexd.ExtractionResult)
        with self.assertRaises(spexd.DesispecUnavailable) as e:
            r.to_desispec()
        self.assertIn("not packaged in Debian", str(e.exception))
        self.assertIn("scripts/desispec_stack.sh", str(e.exception))
        self.assertIn("result.write", str(e.exception))

    def test_fibermap_rows_keep_the_hdu_keys_as_desispec_does(self):
        # desispec.io.read_fibermap keeps a fibermap HDU's exposure keys in Table.meta and
        # write_frame writes them back; to_desispec() hands desispec this Table.
        import io
        from astropy.io import fits
        from spexd.frame_file import fibermap_rows

        hdu = fits.BinTableHDU.from_columns(
            [fits.Column(name="FIBER", format="J", array=np.arange(4), unit="none"),
             fits.Column(name="OBJTYPE", format="3A", array=["TGT", "SKY", "TGT", "TGT"])],
            name="FIBERMAP")
        hdu.header["RA"] = (150.1, "Telescope RA [deg]")
        hdu.header["MJD-OBS"] = 59620.3
        buf = io.BytesIO()
        fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(buf, checksum=True)
        rows = fibermap_rows(buf.getvalue(), [1, 3])
        self.assertEqual(dict(rows.meta), {"RA": 150.1, "MJD-OBS": 59620.3})
        self.assertEqual(list(rows["FIBER"]), [1, 3])

    def test_health_flags_a_bad_frame(self):
        frame = {"flux": np.ones((4, 10)), "ivar": np.ones((4, 10)),
                 "mask": np.zeros((4, 10), np.uint32), "chi2pix": np.ones((4, 10))}
        self.assertEqual(qa.health(frame)[0], "OK")
        frame["ivar"][2] = 0  # a dead fibre
        verdict, problems, _ = qa.health(frame)
        self.assertEqual(verdict, "CHECK")
        self.assertIn("1 fibres without a valid bin", problems)


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

    def test_page(self):
        out = os.path.join(self.dir, "qa.svg")
        proc = subprocess.run(
            [sys.executable, "-m", "spexd.qa", self.frame, "-o", out, "--model",
             self.model_path, "--image", self.preproc], capture_output=True, text=True,
            timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("server QA (request 42): worst condition 12.5", proc.stdout)
        self.assertIn(f"spexd.qa: {out} (CHECK)", proc.stdout)
        page = svg_page.read_page(out)
        root = page["root"]
        self.assertEqual((root.tag, root.get("width"), root.get("height")),
                         (svg_page.NS + "svg", "1600", "1000"))
        texts = dict(page["texts"])
        # The title in the verdict's colour (red for CHECK), the server's QA line, the
        # panels' titles.
        self.assertEqual(texts["frame.fits  camera b1  6 fibres x 200 bins  |  CHECK: "
                               "1 fibres without a valid bin"], "#b22222")
        self.assertNotIn("#006400", texts.values())
        self.assertTrue(any(t.startswith("server QA (request 42): worst condition 12.5")
                            for t in texts))
        for title in ("median S/N per fibre (unmasked bins)",
                      "spectra: best, median, worst S/N (x = masked bin)",
                      "CHI2PIX (log; ~1 is good)", "MASK (white: good)"):
            self.assertIn(title, texts)
        res, _ = qa.residual_image(self.model_path, self.preproc)
        rms = np.sqrt(np.nanmean(res ** 2))
        self.assertIn(f"(image - model)/sigma on the CCD, rms {rms:.2f}", texts)

        # The three images, in the order drawn: CHI2PIX, MASK, residual, each at its
        # array's size (small enough for no blocks), fibre FIBERMIN and CCD row 0 at the
        # bottom.
        images = page["images"]
        self.assertEqual(len(images), 3)
        for element, _ in images:
            self.assertEqual(element.get("style"), "image-rendering:pixelated")
            self.assertEqual(element.get("preserveAspectRatio"), "none")
        (w, h, _, mask_rgb) = images[1][1]
        self.assertEqual((h, w), (self.NSPEC, self.NWAVE))
        colour = dict(zip(qa._MASK_NAMES, qa._MASK_COLOURS))
        want = np.empty((self.NSPEC, self.NWAVE, 3), np.uint8)
        want[:] = colour["good"]
        want[1, :7] = colour["BAD2DFIT"]
        want[2, 10:40] = colour["SOMEBADPIX"]
        np.testing.assert_array_equal(mask_rgb, want[::-1])
        # CHI2PIX on the log scale from 0.1 to 100 (the largest here is < 1.5), palette
        # index = the scaled value in steps of 1/(levels - 1), levels = NaN's entry.
        (w, h, chi2_index, chi2_rgb) = images[0][1]
        self.assertEqual((h, w), (self.NSPEC, self.NWAVE))
        chi2 = self.chi2.astype(np.float32).astype(np.float64)
        levels = svg_draw.LEVELS
        scaled = (np.log10(chi2) - np.log10(0.1)) / (np.log10(100.0) - np.log10(0.1))
        np.testing.assert_array_equal(chi2_index, np.rint(scaled * (levels - 1))[::-1])
        # The palette: magma interpolated at each index's value (to the nearest integer).
        v = chi2_index / (levels - 1)
        magma = np.stack([np.interp(v, np.linspace(0, 1, len(qa._MAGMA)),
                                    [a[c] for a in qa._MAGMA]) for c in range(3)], axis=-1)
        np.testing.assert_allclose(chi2_rgb, magma, rtol=0, atol=0.5)
        self.assertGreater(len(np.unique(chi2_rgb.reshape(-1, 3), axis=0)), 10)
        # The residual over (-5, 5) sigma; the masked CCD pixel (row 25, column 20 of a cut
        # from (0, 0)) in NaN's light grey.
        (w, h, res_index, res_rgb) = images[2][1]
        self.assertEqual((h, w), res.shape)
        self.assertEqual(res.shape, (50, 50))
        want = np.rint(np.clip((res + 5) / 10, 0, 1) * (levels - 1))
        want[~np.isfinite(res)] = levels
        np.testing.assert_array_equal(res_index, want[::-1])
        np.testing.assert_array_equal(res_rgb[49 - 25, 20], (235, 235, 235))

        # Without the model the residual panel says how to get it; the page is still drawn.
        bare = os.path.join(self.dir, "bare.svg")
        self.assertEqual(qa.draw(self.frame, bare), "CHECK")
        page = svg_page.read_page(bare)
        self.assertEqual(len(page["images"]), 2)
        self.assertIn("no model image given", dict(page["texts"]))
        # A page named other than .svg is refused, and nothing is written.
        proc = subprocess.run([sys.executable, "-m", "spexd.qa", self.frame, "-o",
                               os.path.join(self.dir, "qa.png")], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("the QA page is an SVG file", proc.stderr)
        with self.assertRaisesRegex(ValueError, "does not end in .svg"):
            qa.draw(self.frame, os.path.join(self.dir, "qa.png"))
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["bare.svg", "frame.fits", "model.fits", "preproc.fits", "qa.svg"])

    def test_png_encoder(self):
        # Sizes of one pixel, one row, one column and a full frame's 500 x 2881 (rows of
        # 2882 bytes in one zlib stream); all 256 palette entries.
        rng = np.random.default_rng(8)
        palette = [tuple(int(c) for c in rng.integers(0, 256, 3)) for _ in range(256)]
        for shape in ((1, 1), (1, 7), (9, 1), (500, 2881)):
            indices = rng.integers(0, 256, shape).astype(np.uint8)
            w, h, back, rgb = svg_page.decode_png(svg_draw.png_indexed(indices, palette))
            self.assertEqual((h, w), shape)
            np.testing.assert_array_equal(back, indices)
            np.testing.assert_array_equal(rgb, np.array(palette, np.uint8)[indices])
        with self.assertRaisesRegex(ValueError, "palette entries"):
            svg_draw.png_indexed(np.full((2, 2), 3, np.uint8), palette[:3])
        with self.assertRaisesRegex(ValueError, "shape"):
            svg_draw.png_indexed(np.zeros((0, 4), np.uint8), palette)

    def test_full_frame_page_stays_small(self):
        # 500 fibres x 2881 bins and a full CCD of residual, all noise (the worst case for
        # deflate): the page stays under 3 MB, CHI2PIX and MASK bin for bin, the residual
        # in blocks.
        import fitsio

        rng = np.random.default_rng(9)
        shape, ccd = (500, 2881), (4128, 4114)
        frame = os.path.join(self.dir, "full-frame.fits")
        mask = np.where(rng.random(shape) < 0.01, np.uint32(1 << 16), np.uint32(0))
        with fitsio.FITS(frame, "rw", clobber=True) as f:
            f.write(None)
            f.write((100 + 10 * rng.standard_normal(shape)).astype(np.float32),
                    extname="FLUX", header={"FIBERMIN": 0, "CAMERA": "z0"})
            f.write(np.full(shape, 0.01, np.float32), extname="IVAR")
            f.write(mask, extname="MASK")
            f.write(7520.0 + 0.8 * np.arange(shape[1]), extname="WAVELENGTH")
            f.write((rng.chisquare(3, shape) / 3).astype(np.float32), extname="CHI2PIX")
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
        out = os.path.join(self.dir, "full.svg")
        self.assertEqual(qa.draw(frame, out, model_path, preproc), "OK")
        self.assertLess(os.path.getsize(out), 3_000_000)
        page = svg_page.read_page(out)
        sizes = [(h, w) for _, (w, h, _, _) in page["images"]]
        self.assertEqual(sizes, [shape, shape, (826, 823)])  # ceil(4128 / 5), ceil(4114 / 5)
        self.assertIn("each pixel: 5 x 5 CCD pixels, sum / sqrt(n)", dict(page["texts"]))


class FrameKeysTest(unittest.TestCase):
    """FLAVOR/CAMERA: desispec's write_frame refuses a frame without them, so an upload
    of arrays without them warns, and flavor=/camera= put them in the header."""

    def test_missing_keys_warn_and_can_be_given(self):
        import io
        import warnings
        from astropy.io import fits
        from spexd import request
        from spexd.desi_conventions import FrameKeysWarning

        img = np.zeros((4, 4), np.float32)
        with self.assertWarnsRegex(FrameKeysWarning, "FLAVOR or CAMERA"):
            request.preproc_fits_bytes(img, img)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FrameKeysWarning)
            data = request.preproc_fits_bytes(img, img, flavor="science", camera="r0")
        with fits.open(io.BytesIO(data)) as f:
            self.assertEqual((f[0].header["FLAVOR"], f[0].header["CAMERA"]), ("science", "r0"))

    def test_shortened_paths(self):
        from spexd.desi_conventions import shorten_path

        saved = {k: os.environ.pop(k, None) for k in
                 ("DESI_SPECTRO_CALIB", "DESI_SPECTRO_REDUX", "SPECPROD", "DESI_ROOT",
                  "DESI_ROOT_READONLY")}
        try:
            os.environ.update(DESI_SPECTRO_CALIB="/calib", DESI_SPECTRO_REDUX="/redux",
                              SPECPROD="daily", DESI_ROOT="/redux", DESI_ROOT_READONLY="/ro")
            self.assertEqual(shorten_path("/calib/psf.fits"), "SPCALIB/psf.fits")
            self.assertEqual(shorten_path("/redux/daily/preproc/p.fits"),
                             "SPECPROD/preproc/p.fits")
            self.assertEqual(shorten_path("/ro/daily/x.fits"), "SPECPROD/x.fits")
            self.assertEqual(shorten_path("/data/raw.fits"), "/data/raw.fits")
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v


class InstallTest(unittest.TestCase):
    """`pip install` of the build tree's package with Debian's Python, offline, into a
    virtual environment that sees Debian's modules: the package, its stubs and the
    spexd-desi-extract console script."""

    def test_pip_install_from_build_tree(self):
        import shutil
        import subprocess
        import sys
        import tempfile

        built = os.path.dirname(os.path.dirname(os.path.abspath(spexd.__file__)))
        if not os.path.exists(os.path.join(built, "pyproject.toml")):
            self.skipTest(f"{built} has no pyproject.toml (not the build tree's package)")
        work = tempfile.mkdtemp(prefix="spexd-pip-")
        self.addCleanup(shutil.rmtree, work, True)
        # Straight from the build tree: setup.py keeps setuptools' build/ and egg-info out of it.
        listing = lambda: sorted(os.path.relpath(os.path.join(d, f), built)
                                 for d, dirs, files in os.walk(built) for f in files + dirs
                                 if "__pycache__" not in d and f != "__pycache__")
        before = listing()
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index",
                            "--no-build-isolation", built], capture_output=True, text=True,
                           cwd=work)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(listing(), before, "pip wrote into the build tree")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        r = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                            "import spexd, spexd.desi, spexd.v1.spexd_pb2 as pb; "
                            "print(spexd.__file__, spexd.__version__, "
                            "pb.MASK_POLICY_DESISPEC_EXACT)"],
                           capture_output=True, text=True, env=env, cwd=work)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(venv, r.stdout)
        self.assertIn(f" {spexd.__version__} 3", r.stdout)
        r = subprocess.run([os.path.join(venv, "bin", "spexd-desi-extract"), "--help"],
                           capture_output=True, text=True, env=env, cwd=work)
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in ("--fibermap", "--barycentric-correction", "--no-scores", "--server"):
            self.assertIn(flag, r.stdout)

    def test_pip_install_from_sources_leaves_them_clean(self):
        # A plain `pip install client/python`: setuptools' build/ and egg-info and the
        # generated stubs go to a temporary folder, not into the sources; the installed
        # spexd-desi-extract then finds spexctl on PATH for a local extraction.
        import shutil
        import subprocess
        import sys
        import tempfile

        import support

        src = os.path.join(os.environ.get("SPEXD_SOURCE_DIR", os.path.join(
            os.path.dirname(__file__), "..", "..")), "client", "python")
        if not (shutil.which("protoc") and shutil.which("grpc_python_plugin")):
            self.skipTest("protoc/grpc_python_plugin absent: the sources' stubs cannot be made")
        listing = lambda: sorted(os.path.relpath(os.path.join(d, f), src)
                                 for d, dirs, files in os.walk(src) for f in files + dirs
                                 if "__pycache__" not in d and f != "__pycache__")
        before = listing()
        work = tempfile.mkdtemp(prefix="spexd-pip-src-")
        self.addCleanup(shutil.rmtree, work, True)
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index",
                            "--no-build-isolation", src], capture_output=True, text=True,
                           cwd=work)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(listing(), before, "pip wrote into the sources")
        inp = support.inputs()
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "SPEXD_SERVER")}
        env["PATH"] = os.path.dirname(support.exe("spexctl")) + os.pathsep + "/usr/bin:/bin"
        out = os.path.join(work, "frame.fits")
        r = subprocess.run([os.path.join(venv, "bin", "spexd-desi-extract"), "-i", inp["preproc"],
                            "-p", inp["psf"], "-o", out, "-n", "25",
                            "-w", ",".join(str(v) for v in support.WAVELENGTH)],
                           capture_output=True, text=True, env=env, cwd=work)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("extracting locally", r.stderr)
        self.assertTrue(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
