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
import support
from spexd import qa


class PackageTest(unittest.TestCase):
    def test_version_matches_the_cpp_one(self):
        src = os.environ.get("SPEXD_SOURCE_DIR", "")
        with open(os.path.join(src, "core", "base", "version.h")) as f:
            cpp = re.search(r'kSpexdVersion = "([^"]+)"', f.read()).group(1)
        self.assertEqual(spexd.__version__, cpp)

    def test_qa_extra_names_what_spexd_qa_imports(self):
        # pip install 'spexd[qa]' brings what the QA page needs: fitsio to read the frame,
        # matplotlib to draw it.
        import tomllib
        src = os.environ.get("SPEXD_SOURCE_DIR", "")
        with open(os.path.join(src, "client", "python", "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        self.assertEqual(sorted(project["optional-dependencies"]["qa"]), ["fitsio", "matplotlib"])
        self.assertNotIn("matplotlib", project["dependencies"])

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
