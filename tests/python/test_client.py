"""The Python client against real spexd servers (CPU backend, loopback).

Reference: `spexctl extract --local` on the same simulated frame. The frame file holds
float32 FLUX/IVAR/CHI2PIX/RESOLUTION, so those are compared after the same float32
cast; the float64 values themselves are pinned by the SCORES columns (float64 sums and
medians over ~450 bins of every fibre), which must be equal to the bit.
"""
import asyncio
import gzip
import os
import subprocess
import sys
import unittest

import numpy as np
from astropy.io import fits

import spexd
import support
from spexd.request import read_preproc
from spexd.result import BAD2DFIT, SOMEBADPIX

PARAMS = dict(wavelength=support.WAVELENGTH, specmin=0, nspec=support.NSPEC)


def setUpModule():
    global SERVER, IN, LOCAL
    IN = support.inputs()
    SERVER = support.Server()
    LOCAL = fits.open(IN["local"], memmap=False)


class Reference(unittest.TestCase):
    def assertEqualsLocal(self, r):
        self.assertEqual(r.flux.dtype, np.float64)
        self.assertEqual(list(r.fibers), list(range(support.NSPEC)))
        for name, arr in (("FLUX", r.flux), ("IVAR", r.ivar), ("CHI2PIX", r.chi2pix),
                          ("RESOLUTION", r.resolution_data)):
            np.testing.assert_array_equal(arr.astype(np.float32), LOCAL[name].data, name)
        np.testing.assert_array_equal(r.mask, LOCAL["MASK"].data)
        self.assertEqual(r.mask.dtype, np.uint32)
        np.testing.assert_array_equal(r.wave, LOCAL["WAVELENGTH"].data)
        scores, comments = r.scores
        self.assertEqual(list(scores), list(LOCAL["SCORES"].columns.names))
        for k, v in scores.items():
            np.testing.assert_array_equal(v, LOCAL["SCORES"].data[k], k)


class ExtractTest(Reference):
    def test_by_server_path_equals_local_run(self):
        with spexd.Client(SERVER.target) as c:
            r = c.extract(server_path=IN["preproc"], psf_server_path=IN["psf"], **PARAMS)
        self.assertEqualsLocal(r)
        self.assertEqual(r.summary.nbundles, 2)
        self.assertEqual(r.summary.nfibers, support.NSPEC)
        self.assertEqual(r.summary.counts.failed, 0)

    def test_by_upload_of_numpy_arrays_equals_local_run(self):
        image, ivar, mask, fibermap, header = read_preproc(IN["preproc"])
        with spexd.Client(SERVER.target) as c:
            r = c.extract(image=image, ivar=ivar, mask=mask, fibermap=fibermap, header=header,
                          psf=IN["psf"], **PARAMS)
        self.assertEqualsLocal(r)
        self.assertGreater(r.summary.upload_seconds, 0)
        self.assertEqual(list(r.fibermap["FIBER"]), list(range(support.NSPEC)))

    def test_by_upload_of_a_file_with_model(self):
        with spexd.Client(SERVER.target) as c:
            r = c.extract(image=IN["preproc"], psf=IN["psf"], want_model=True, **PARAMS)
        self.assertEqualsLocal(r)
        with fits.open(IN["model"], memmap=False) as m:
            np.testing.assert_array_equal(r.model, m[0].data)  # float64 both ways

    def test_async_client_equals_local_run(self):
        async def go():
            async with spexd.aio.Client(SERVER.target) as c:
                r = await c.extract(server_path=IN["preproc"], psf_server_path=IN["psf"],
                                    **PARAMS)
                seen = [b.bundle async for b in c.iter_bundles(
                    server_path=IN["preproc"], psf_server_path=IN["psf"], **PARAMS)]
                return r, seen
        r, seen = asyncio.run(go())
        self.assertEqualsLocal(r)
        self.assertEqual(seen, [0, 1])


class StreamingTest(unittest.TestCase):
    def test_every_bundle_arrives_once_in_order(self):
        with spexd.Client(SERVER.target) as c:
            stream = c.iter_bundles(server_path=IN["preproc"], psf_server_path=IN["psf"],
                                    bundlesize=10, **PARAMS)
            bundles = list(stream)
        self.assertEqual([b.bundle for b in bundles], list(stream.header.bundles))
        self.assertEqual([b.bundle for b in bundles], [0, 1, 2, 3, 4])
        fibres = np.concatenate([np.arange(b.fiber_begin, b.fiber_begin + b.nfibers)
                                 for b in bundles])
        self.assertEqual(list(fibres), list(range(support.NSPEC)))  # each fibre once
        self.assertEqual(stream.summary.nbundles, 5)
        for b in bundles:
            self.assertEqual(b.flux.shape, (b.nfibers, len(stream.header.wave)))
            self.assertTrue(np.all(np.isfinite(b.flux)))

    def test_subset_and_early_stop(self):
        with spexd.Client(SERVER.target) as c:
            stream = c.iter_bundles(server_path=IN["preproc"], psf_server_path=IN["psf"],
                                    fibers=[30], **PARAMS)
            got = [(b.bundle, b.fiber_begin, b.nfibers) for b in stream]
            self.assertEqual(got, [(1, 25, 25)])
            # A consumer that stops after the first bundle cancels the call; the server
            # keeps serving.
            for b in c.iter_bundles(server_path=IN["preproc"], psf_server_path=IN["psf"],
                                    **PARAMS):
                self.assertEqual(b.bundle, 0)
                break
            self.assertTrue(c.server_info().serving)


class ErrorTest(unittest.TestCase):
    def test_bad_requests_raise_the_status(self):
        with spexd.Client(SERVER.target, retries=1) as c:
            with self.assertRaises(spexd.NotFound) as e:
                c.extract(server_path=IN["preproc"], psf_id="0" * 64, **PARAMS)
            self.assertIn("psf", e.exception.details.lower())
            with self.assertRaises(spexd.PermissionDenied):
                c.extract(server_path="/etc/passwd", psf_server_path=IN["psf"], **PARAMS)
            with self.assertRaises(spexd.InvalidArgument) as e:
                c.extract(server_path=IN["preproc"], psf_server_path=IN["psf"],
                          wavelength=support.WAVELENGTH, specmin=480, nspec=50)
            self.assertEqual(e.exception.code.name, "INVALID_ARGUMENT")
            with self.assertRaises(spexd.InvalidArgument):  # an image unlike the PSF's CCD
                c.extract(image=np.zeros((10, 10)), ivar=np.ones((10, 10)), psf=IN["psf"],
                          **PARAMS)
            with self.assertRaises(spexd.NotFound):
                c.unload_psf("f" * 64)
            self.assertTrue(c.server_info().serving)  # still serving
        with self.assertRaises(ValueError):
            spexd.client.ExtractSpec(server_path="x", psf="a", psf_id="b")
        with self.assertRaises(ValueError):
            spexd.client.ExtractSpec(server_path="x", psf="a", compat="fast")

    def test_desi_extract_reports_a_refusal_in_one_line(self):
        # spexd-desi-extract --server with an ordinary refusal: one line on stderr naming
        # the status, exit status 1, no traceback; nothing written.
        out = os.path.join(support.work_dir(), "refused-frame.fits")
        # A grid outside the PSF's wavelength range: the server's refusal, not desispec's
        # own option checks (which spexd.desi makes before it asks the server).
        r = support.run_python([sys.executable, "-m", "spexd.desi", "-i", IN["preproc"],
                                "-p", IN["psf"], "-o", out, "-w", "1000.0,1100.0,0.8",
                                "-n", "25", "--server", SERVER.target],
                               timeout=120, server=SERVER)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        errors = [line for line in r.stderr.splitlines() if "error:" in line]
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertIn("INVALID_ARGUMENT", errors[0])
        self.assertFalse(os.path.exists(out))
        with spexd.Client(SERVER.target) as c:
            self.assertTrue(c.server_info().serving)  # still serving

    def test_a_proxy_in_the_environment_is_not_used_on_loopback(self):
        # Clusters set http_proxy: a channel to this host's loopback must not go through
        # it (the proxy cannot reach it). The proxy here refuses every connection.
        names = ("http_proxy", "https_proxy", "grpc_proxy")
        saved = {n: os.environ.get(n) for n in names}
        try:
            for n in names:
                os.environ[n] = "http://127.0.0.1:1"
            self.assertTrue(spexd._channel.is_local_target(SERVER.target))
            with spexd.Client(SERVER.target, retries=1, deadline=20) as c:
                self.assertTrue(c.server_info().serving)
        finally:
            for n, v in saved.items():
                if v is None:
                    os.environ.pop(n, None)
                else:
                    os.environ[n] = v
        for target, local in [("127.0.0.1:5", True), ("localhost:5", True),
                              ("dns:///localhost:5", True), ("[::1]:5", True),
                              ("unix:/tmp/spexd.sock", True), ("ipv4:127.0.0.1:5,10.0.0.1:5", False),
                              ("node01:50051", False), ("10.1.2.3:5", False)]:
            self.assertEqual(spexd._channel.is_local_target(target), local, target)

    def test_unreachable_server_is_unavailable_after_retries(self):
        with spexd.Client("127.0.0.1:1", retries=3, deadline=5) as c:
            with self.assertRaises(spexd.Unavailable) as e:
                c.server_info()
        self.assertIsInstance(e.exception, spexd.SpexdError)

    def test_token(self):
        token_file = os.path.join(support.work_dir(), "token")
        with open(token_file, "w") as f:
            f.write("s3cret\n")
        guarded = support.Server(f"--auth_token_file={token_file}")
        with spexd.Client(guarded.target, retries=1) as c:
            with self.assertRaises(spexd.Unauthenticated):
                c.server_info()
        with spexd.Client(guarded.target, token="s3cret") as c:
            self.assertTrue(c.server_info().auth_required)
        guarded.stop()


class FrameFileTest(Reference):
    """The files: Python-written, spexctl-written and server-written frames."""

    @classmethod
    def setUpClass(cls):
        cls.server_out = os.path.join(support.work_dir(), "server-frame.fits")
        with spexd.Client(SERVER.target) as c:
            cls.result = c.extract(server_path=IN["preproc"], psf_server_path=IN["psf"],
                                   server_output_path=cls.server_out, **PARAMS)
        cls.py_out = os.path.join(support.work_dir(), "py-frame.fits")
        cls.result.write(cls.py_out)

    def test_python_file_equals_spexctl_file(self):
        with fits.open(self.py_out, memmap=False) as py:
            self.assertEqual([h.name for h in py], [h.name for h in LOCAL])
            for a, b in zip(py, LOCAL):
                if a.name in ("FIBERMAP", "SCORES"):
                    self.assertEqual(a.columns.names, b.columns.names)
                    self.assertEqual(a.columns.formats, b.columns.formats)
                    for col in a.columns.names:
                        np.testing.assert_array_equal(a.data[col], b.data[col], col)
                else:
                    self.assertEqual(a.data.dtype, b.data.dtype, a.name)
                    np.testing.assert_array_equal(a.data, b.data, a.name)
            for key in ("NSPEC", "WAVEMIN", "WAVEMAX", "WAVESTEP", "BUNIT", "FIBERMIN",
                        "CAMERA", "EXPID", "SPECTER", "SIMSEED"):
                self.assertEqual(py[0].header[key], LOCAL[0].header[key], key)
            for i in (1, 2, 3):
                self.assertEqual(py["SCORES"].header.comments[f"TTYPE{i}"],
                                 LOCAL["SCORES"].header.comments[f"TTYPE{i}"])

    def test_gzip_output(self):
        path = os.path.join(support.work_dir(), "py-frame.fits.gz")
        self.result.write(path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(2), b"\x1f\x8b")
        with fits.open(path, memmap=False) as z, fits.open(self.py_out, memmap=False) as p:
            np.testing.assert_array_equal(z["FLUX"].data, p["FLUX"].data)

    def test_server_written_frame_equals_local(self):
        self.assertEqual(self.result.summary.server_output_path, self.server_out)
        with fits.open(self.server_out, memmap=False) as s:
            for name in ("FLUX", "IVAR", "MASK", "WAVELENGTH", "RESOLUTION", "CHI2PIX"):
                np.testing.assert_array_equal(s[name].data, LOCAL[name].data, name)
            for k in LOCAL["SCORES"].columns.names:
                np.testing.assert_array_equal(s["SCORES"].data[k], LOCAL["SCORES"].data[k])

    def test_desispec_read_frame_view(self):
        """What desispec.io.read_frame relies on, checked with astropy on all three
        files (docs/python-client.md: how this was checked against desispec itself)."""
        for path in (IN["local"], self.server_out, self.py_out):
            with self.subTest(path=os.path.basename(path)):
                check_desispec_layout(self, path, support.NSPEC, len(self.result.wave))


def check_desispec_layout(test, path, nspec, nwave):
    with fits.open(path, uint=True, memmap=False, checksum=True) as f:
        names = [h.name for h in f]
        test.assertEqual(names, ["FLUX", "IVAR", "MASK", "WAVELENGTH", "RESOLUTION",
                                 "FIBERMAP", "CHI2PIX", "SCORES"])
        for h in f:
            test.assertIn("CHECKSUM", h.header, h.name)
        hdr = f[0].header
        test.assertEqual(hdr["BUNIT"], "electron/Angstrom")
        test.assertEqual(f["WAVELENGTH"].header["BUNIT"], "Angstrom")
        for name in ("FLUX", "IVAR", "CHI2PIX"):
            test.assertEqual(f[name].data.dtype, np.dtype(">f4"), name)
            test.assertEqual(f[name].data.shape, (nspec, nwave), name)
        test.assertEqual(f["MASK"].data.dtype, np.uint32)
        test.assertEqual(f["WAVELENGTH"].data.dtype, np.dtype(">f8"))
        res = f["RESOLUTION"].data
        test.assertEqual(res.dtype, np.dtype(">f4"))
        test.assertEqual((res.shape[0], res.shape[2]), (nspec, nwave))
        test.assertEqual(res.shape[1] % 2, 1)  # 2*ndiag+1 diagonals
        fm = f["FIBERMAP"].data
        test.assertEqual(len(fm), nspec)
        for col in ("FIBER", "TARGETID", "OBJTYPE", "FIBERSTATUS"):
            test.assertIn(col, fm.columns.names)
        np.testing.assert_array_equal(fm["FIBER"], hdr["FIBERMIN"] + np.arange(nspec))
        # read_frame: 'SPECGRPH' in hdr, else int(CAMERA[1]).
        test.assertTrue("SPECGRPH" in hdr or "CAMERA" in hdr)
        scores = f["SCORES"]
        test.assertEqual(len(scores.data), nspec)
        for i, col in enumerate(scores.columns, start=1):
            test.assertEqual(col.format, "D")
            test.assertTrue(scores.header.comments[f"TTYPE{i}"])  # read_frame reads them
        test.assertEqual(
            sorted(scores.columns.names),
            ["MEDIAN_RAW_COUNT_R", "MEDIAN_RAW_SNR_R", "SUM_RAW_COUNT_R"])
        deps = {hdr[f"DEPNAM{i:02d}"]: hdr[f"DEPVER{i:02d}"] for i in range(100)
                if f"DEPNAM{i:02d}" in hdr}
        test.assertEqual(deps.get("spexd"), spexd.__version__)


def desispec_or_skip(test):
    import desispec_env

    why = desispec_env.why_not("desispec.specscore")
    if why:
        test.skipTest(why)


class DesispecTest(unittest.TestCase):
    """Runs only where desispec imports (not in CI): desispec's own reader, scores and
    writer on the three kinds of frame file and on result.to_desispec()."""

    def test_desispec_reads_scores_and_round_trips(self):
        desispec_or_skip(self)
        import desispec.io
        from desispec.specscore import compute_frame_scores

        with spexd.Client(SERVER.target) as c:
            server_out = os.path.join(support.work_dir(), "server-frame-d.fits")
            r = c.extract(server_path=IN["preproc"], psf_server_path=IN["psf"],
                          server_output_path=server_out, **PARAMS)
        py_out = os.path.join(support.work_dir(), "py-frame-d.fits")
        r.write(py_out)
        frame = r.to_desispec()
        np.testing.assert_array_equal(frame.flux, r.flux)
        self.assertEqual(frame.R[0].shape, (len(r.wave), len(r.wave)))
        # desispec's own definitions on the float64 result give the file's SCORES bits.
        scores, _ = compute_frame_scores(frame, suffix="RAW", flux_per_angstrom=False)
        for path in (IN["local"], server_out, py_out):
            fr = desispec.io.read_frame(path)
            np.testing.assert_array_equal(fr.flux, LOCAL["FLUX"].data.astype(np.float64))
            np.testing.assert_array_equal(fr.mask, LOCAL["MASK"].data)
            for k, v in scores.items():
                np.testing.assert_array_equal(fr.scores[k], v, k)
            again = os.path.join(support.work_dir(), "desispec-rewrite.fits")
            desispec.io.write_frame(again, fr)
            back = desispec.io.read_frame(again)
            np.testing.assert_array_equal(back.flux, fr.flux)
            np.testing.assert_array_equal(back.resolution_data, fr.resolution_data)


class QaTest(unittest.TestCase):
    @support.needs_matplotlib
    def test_qa_page_is_a_png_of_the_frame(self):
        from PIL import Image
        from spexd import qa

        out = os.path.join(support.work_dir(), "qa.png")
        proc = subprocess.run(
            [sys.executable, "-m", "spexd.qa", IN["local"], "-o", out, "--model", IN["model"],
             "--image", IN["preproc"]], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("(OK)", proc.stdout)  # the simulated frame is healthy
        with Image.open(out) as im:
            self.assertEqual((im.format, im.size), ("PNG", (1600, 1000)))
            rgb = np.asarray(im.convert("RGB")).astype(int)
        self.assertGreater(len(np.unique(rgb.reshape(-1, 3), axis=0)), 500)  # not blank
        # The title in dark green (OK) above the panels.
        green = (np.abs(rgb[:100] - (0, 100, 0)) <= 8).all(axis=-1)
        self.assertGreater(np.count_nonzero(green), 200)
        # The figure behind it: the verdict line, and CHI2PIX and the residual over the part
        # of the CCD the model covers, both in blocks of at most 400 x 400: each block's
        # largest CHI2PIX (501 bins: 2 a block, the last one alone) and the residual's
        # sum / sqrt(n) over 3 x 2 pixels.
        fig, verdict = qa.figure(IN["local"], IN["model"], IN["preproc"])
        self.assertEqual(verdict, "OK")
        self.assertEqual(fig._suptitle.get_text().split("\n")[0],
                         f"{os.path.basename(IN['local'])}  camera r0  {support.NSPEC} fibres x "
                         f"{LOCAL['FLUX'].data.shape[1]} bins  |  OK")
        images = [ax.images[0].get_array() for ax in fig.axes if ax.images]
        chi2 = np.clip(LOCAL["CHI2PIX"].data.astype(np.float64), 1e-2, None)
        self.assertEqual(chi2.shape, (support.NSPEC, 501))
        want = np.c_[np.maximum(chi2[:, 0:500:2], chi2[:, 1:500:2]), chi2[:, 500]]
        np.testing.assert_array_equal(images[0], want)
        self.assertEqual(images[1].shape, want.shape)
        res, _ = qa.residual_image(IN["model"], IN["preproc"])
        h, w = res.shape
        self.assertTrue(800 < h <= 1200 and 400 < w <= 800, res.shape)
        pad = np.full((-(-h // 3) * 3, -(-w // 2) * 2), np.nan)
        pad[:h, :w] = res
        blocks = pad.reshape(pad.shape[0] // 3, 3, pad.shape[1] // 2, 2)
        n = np.isfinite(blocks).sum(axis=(1, 3))
        with np.errstate(invalid="ignore", divide="ignore"):
            want = np.where(n > 0, np.nansum(blocks, axis=(1, 3)) / np.sqrt(n), np.nan)
        np.testing.assert_allclose(images[2].filled(np.nan), want, rtol=1e-12, atol=0)

    def test_server_qa_in_the_result_the_frame_file_and_spexd_qa(self):
        # The summary's FrameQa reaches the Python result, the FLUX header of the
        # frame the client writes when asked (qa_keywords=True; never by default, which
        # must stay desispec's file key for key), and `python3 -m spexd.qa FRAME`.
        with spexd.Client(SERVER.target) as c:
            r = c.extract(server_path=IN["preproc"], psf_server_path=IN["psf"], **PARAMS)
        qa = r.qa
        self.assertGreater(qa["request_id"], 0)
        self.assertGreater(qa["worst_condition"], 1.0)
        self.assertIn(qa["worst_condition_bundle"], (0, 1))
        self.assertEqual(qa["bins"], r.mask.size)
        self.assertEqual(qa["bad2dfit_bins"], int(np.count_nonzero(r.mask & BAD2DFIT)))
        self.assertEqual(qa["somebadpix_bins"], int(np.count_nonzero(r.mask & SOMEBADPIX)))
        good = r.ivar > 0
        self.assertAlmostEqual(qa["median_chi2pix"], float(np.median(r.chi2pix[good])), places=9)
        from astropy.io import fits
        plain = os.path.join(support.work_dir(), "qa-frame-plain.fits")
        r.write(plain)
        with fits.open(plain) as f:
            self.assertNotIn("SPXREQ", f["FLUX"].header)
        out = os.path.join(support.work_dir(), "qa-frame.fits")
        r.write(out, qa_keywords=True)
        with fits.open(out) as f:
            self.assertEqual(f["FLUX"].header["SPXREQ"], qa["request_id"])
        proc = subprocess.run([sys.executable, "-m", "spexd.qa", out], capture_output=True,
                              text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"server QA (request {qa['request_id']})", proc.stdout)
        self.assertIn("BAD2DFIT", proc.stdout)


if __name__ == "__main__":
    unittest.main()
