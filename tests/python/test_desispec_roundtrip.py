"""desispec's own code on every kind of spexd frame: read_frame -> write_frame
-> read_frame, then desispec's sky subtraction (desi_compute_sky with a unity fiberflat,
apply_fiberflat, subtract_sky, write_frame of the sframe).

Frames: case A (fibres 0-24, 5760-6160 A) in the six desi_extract_spectra option sets of
the reference data's desispec/, made four ways: `spexctl extract --local` (CLI), the server's
own file (`--server-output-path`), the Python client's `result.write()` and its
`result.to_desispec()` Frame (handed to desispec's write_frame); and two gzip-compressed
CLI frames (`-o frame.fits.gz`, default and --barycentric-correction) and the same two
written by the server alone (`--server-output-path frame.fits.gz`, no `-o`). The control is the
same pipeline on desispec's own frames stored in the reference data's desispec/.

Checked for each frame: read_frame does not fail its vetting; its arrays are the file's;
after write_frame + read_frame every array, the fibermap, the scores (and their comments)
and every header key are unchanged; the rewritten file equals desispec's rewrite of its own
frame HDU by HDU and key by key (test_desispec_dropin.compare_files: same tolerances and
the same short list of keys that differ by design); the sky model equals the one desispec
computes from its own frame (1e-5 of its maximum, same mask), so is the sframe, and sky
subtraction takes the sky fibres' chi2 per bin (against zero) down at least five times.
Needs desispec (desispec_env.py: skipped, saying how to get it, where it is absent, as in
CI).
"""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

import desispec_env

desispec_env.require("desispec.sky", "desispec.fiberflat", "desispec.scripts.sky")

import desispec.io  # noqa: E402
import numpy as np  # noqa: E402
from astropy.io import fits  # noqa: E402
from desispec.fiberflat import FiberFlat, apply_fiberflat  # noqa: E402
from desispec.scripts import sky as sky_script  # noqa: E402
from desispec.sky import subtract_sky  # noqa: E402

import spexd  # noqa: E402
import support  # noqa: E402
import test_desispec_dropin as dropin  # noqa: E402

_SKIP_META = ("CHECKSUM", "DATASUM", "DEPNAM", "DEPVER")


def _quiet_read(path):
    """read_frame, failing on its 'did not pass simple vetting test' warning."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        frame = desispec.io.read_frame(path)
    vet = [str(w.message) for w in seen if "vetting" in str(w.message)]
    if vet:
        raise AssertionError(f"{path}: {vet}")
    return frame


def _same_frames(test, a, b, what):
    for attr in ("flux", "ivar", "mask", "wave", "resolution_data", "chi2pix"):
        x, y = getattr(a, attr), getattr(b, attr)
        test.assertEqual(x.dtype, y.dtype, f"{what}: {attr}")
        np.testing.assert_array_equal(x, y, f"{what}: {attr}")
    test.assertEqual(list(a.fibermap.colnames), list(b.fibermap.colnames), what)
    for col in a.fibermap.colnames:
        np.testing.assert_array_equal(a.fibermap[col], b.fibermap[col], f"{what}: {col}")
    test.assertEqual(a.scores is None, b.scores is None, f"{what}: scores")
    if a.scores is not None:
        test.assertEqual(a.scores.dtype.names, b.scores.dtype.names, what)
        for col in a.scores.dtype.names:
            np.testing.assert_array_equal(a.scores[col], b.scores[col], f"{what}: {col}")
        test.assertEqual(a.scores_comments, b.scores_comments, what)
    keys = [k for k in a.meta.keys() if not k.startswith(_SKIP_META)]
    for k in keys:
        test.assertIn(k, b.meta, f"{what}: {k} lost")
        test.assertEqual(a.meta[k], b.meta[k], f"{what}: {k}")


def setUpModule():
    global WORK, SERVER, REF_ROUND, REF_SKY, FIBERFLAT
    if not os.path.isdir(dropin.REF) or not os.path.exists(dropin.MAKE_INPUT):
        raise unittest.SkipTest(f"{dropin.REF} absent: desispec's reference frames live in "
                                "the reference data beside the clone")
    WORK = tempfile.mkdtemp(prefix="spexd-desi-rt-", dir=support.work_dir())
    subprocess.run([sys.executable, dropin.MAKE_INPUT, "--preproc", dropin.PREPROC,
                    "--outdir", WORK], check=True)
    for k in dropin.DESI_ENV:
        os.environ.pop(k, None)  # the files' provenance lists them as NOT_SET
    SERVER = support.Server()
    FIBERFLAT = _unity_fiberflat()
    REF_ROUND, REF_SKY = {}, {}


def _unity_fiberflat():
    """A fiberflat of ones (ivar 1) on the frames' grid: sky subtraction without a
    flat-field correction (case A is simulated with equal fibre throughputs)."""
    ref = desispec.io.read_frame(os.path.join(dropin.REF, "frame-default.fits.gz"))
    ones = np.ones_like(ref.flux)
    path = os.path.join(WORK, "fiberflat-unity.fits")
    desispec.io.write_fiberflat(path, FiberFlat(ref.wave, ones, ones, header=ref.meta,
                                                fibermap=ref.fibermap))
    return path


class DesispecRoundTripTest(unittest.TestCase):
    """One test per producer; a subtest per option set."""
    def frames(self, producer):
        """{variant: frame file} made by `producer` (to_desispec: written by desispec)."""
        outdir = tempfile.mkdtemp(prefix=producer + "-", dir=WORK)
        extra = tempfile.mkdtemp(prefix="client-", dir=WORK)
        args = lambda name, d: [a.format(D=d, OUT=WORK) for a in dropin.VARIANTS[name]]
        base = lambda name, d: ["-i", f"{WORK}/preproc-desi.fits", "-p", dropin.PSF, "-s", "0",
                                "-n", "25", "-w", "5760.0,6160.0,0.8", "--no-gpu",
                                "-o", f"{d}/frame-{name}.fits"] + args(name, d)
        out = {}
        if producer == "cli":
            for name in dropin.VARIANTS:
                subprocess.run([support.exe("spexctl"), "extract", "--local", "-q",
                                *base(name, outdir)], check=True)
                out[name] = f"{outdir}/frame-{name}.fits"
        elif producer == "cli_gzip":  # -o frame.fits.gz, as desi_proc may name it
            for name in ("default", "bary"):
                cmd = [a.replace(".fits", ".fits.gz") if a.startswith(outdir) else a
                       for a in base(name, outdir)]
                subprocess.run([support.exe("spexctl"), "extract", "--local", "-q", *cmd],
                               check=True)
                out[name] = f"{outdir}/frame-{name}.fits.gz"
        elif producer in ("server", "server_gzip"):
            ext = "fits.gz" if producer == "server_gzip" else "fits"
            names = ("default", "bary") if producer == "server_gzip" else dropin.VARIANTS
            for name in names:
                out[name] = f"{outdir}/frame-{name}.{ext}"
                cmd = base(name, extra)
                if producer == "server_gzip":  # the server's file alone: nothing streamed
                    at = cmd.index("-o")
                    del cmd[at:at + 2]
                subprocess.run([support.exe("spexctl"), "extract", "-q", "--server",
                                SERVER.target, *cmd, "--server-output-path", out[name]],
                               check=True)
        else:
            kwargs = {"default": {}, "model": {"want_model": True},
                      "bary": {"barycentric_correction": True},
                      "fibermap": {"fibermap_path": f"{WORK}/fibermap.fits"},
                      "noscores": {"no_scores": True}, "regularize": {"regularize": 0.1}}
            with spexd.Client(SERVER.target) as client:
                for name, kw in kwargs.items():
                    r = client.extract(server_path=f"{WORK}/preproc-desi.fits", psf=dropin.PSF,
                                       specmin=0, nspec=25, wavelength=(5760.0, 6160.0, 0.8),
                                       reproduce="gpu_specter_cpu", **kw)
                    out[name] = f"{outdir}/frame-{name}.fits"
                    if producer == "python":
                        r.write(out[name])
                    else:
                        frame = r.to_desispec()
                        np.testing.assert_array_equal(frame.flux, r.flux)
                        desispec.io.write_frame(out[name], frame)
        return out

    def round_trip(self, path, what):
        """read -> write -> read; checks as the module docstring; the rewritten file."""
        first = _quiet_read(path)
        with fits.open(path, memmap=False) as f:
            for hdu, attr in (("FLUX", "flux"), ("IVAR", "ivar"), ("MASK", "mask"),
                              ("WAVELENGTH", "wave"), ("RESOLUTION", "resolution_data"),
                              ("CHI2PIX", "chi2pix")):
                np.testing.assert_array_equal(getattr(first, attr), f[hdu].data,
                                              f"{what}: {hdu}")
            self.assertEqual(first.spectrograph, 0, what)
            self.assertEqual(list(first.fibers), list(range(25)), what)
        again = os.path.join(os.path.dirname(path), "rt-" + os.path.basename(path))
        desispec.io.write_frame(again, first)
        _same_frames(self, first, _quiet_read(again), what)
        return again

    def sky(self, path):
        """desi_compute_sky (desispec.scripts.sky) with the unity fiberflat, then
        apply_fiberflat + subtract_sky + write_frame/read_frame; (sky model, sframe, frame)."""
        sky_path = path.replace(".fits", "-sky.fits")
        sky_script.main(sky_script.parse(["-i", path, "--fiberflat", FIBERFLAT,
                                          "-o", sky_path]))
        model = desispec.io.read_sky(sky_path)
        frame = _quiet_read(path)
        apply_fiberflat(frame, desispec.io.read_fiberflat(FIBERFLAT))
        subtract_sky(frame, model)
        sframe = path.replace(".fits", "-sframe.fits")
        desispec.io.write_frame(sframe, frame)
        return model, _quiet_read(sframe), _quiet_read(path)

    def reference(self, name):
        """desispec's own frame through the same round trip and sky subtraction."""
        if name not in REF_ROUND:
            d = tempfile.mkdtemp(prefix="desispec-", dir=WORK)
            src = os.path.join(d, f"frame-{name}.fits")
            with open(src, "wb") as out:
                with gzip.open(os.path.join(dropin.REF, f"frame-{name}.fits.gz")) as z:
                    shutil.copyfileobj(z, out)
            REF_ROUND[name] = self.round_trip(src, f"desispec {name}")
            REF_SKY[name] = self.sky(src)
        return REF_ROUND[name], REF_SKY[name]

    def check_producer(self, producer):
        for name, path in self.frames(producer).items():
            with self.subTest(producer=producer, variant=name):
                what = f"{producer} {name}"
                if path.endswith(".gz"):
                    with open(path, "rb") as f:
                        self.assertEqual(f.read(2), b"\x1f\x8b", f"{what}: not gzip")
                rewritten = self.round_trip(path, what)
                ref_rewritten, (ref_model, ref_sframe, _) = self.reference(name)
                problems = dropin.compare_files(
                    ref_rewritten, rewritten, tol=1e-6,
                    scores_rtol=2e-6 if name == "bary" else 1e-9)
                self.assertEqual(problems, [], f"{what}: " + "\n".join(problems))
                model, sframe, frame = self.sky(path)
                scale = np.max(np.abs(ref_model.flux))
                self.assertLessEqual(np.max(np.abs(model.flux - ref_model.flux)) / scale,
                                     1e-5, f"{what}: sky model")
                np.testing.assert_array_equal(model.mask, ref_model.mask, f"{what}: sky mask")
                np.testing.assert_allclose(model.ivar, ref_model.ivar, rtol=1e-4, atol=0,
                                           err_msg=f"{what}: sky ivar")
                np.testing.assert_array_equal(sframe.mask, ref_sframe.mask, what)
                self.assertLessEqual(
                    np.max(np.abs(sframe.flux - ref_sframe.flux)) / scale, 1e-5, what)
                sky_fibres = np.where(frame.fibermap["OBJTYPE"] == "SKY")[0]
                self.assertEqual(list(sky_fibres), [2, 9, 16], what)
                # chi2 per bin of the sky fibres against zero: ~4 before, ~0.2 after
                # (case A's sky is a few sigma per bin; the sframe IVAR carries the sky
                # model's variance too).
                chi2 = lambda f: np.mean(f.flux[sky_fibres] ** 2 * f.ivar[sky_fibres])
                self.assertLess(chi2(sframe), chi2(frame) / 5, f"{what}: sky not subtracted")

    def test_cli_frames(self):
        self.check_producer("cli")

    def test_cli_gzip_frames(self):
        self.check_producer("cli_gzip")

    def test_server_written_frames(self):
        self.check_producer("server")

    def test_server_written_gzip_frames(self):
        self.check_producer("server_gzip")

    def test_python_written_frames(self):
        self.check_producer("python")

    def test_python_to_desispec_frames(self):
        self.check_producer("to_desispec")


class DesispecReadsSimulatedPreprocTest(unittest.TestCase):
    def test_read_image_of_spexd_sim_output(self):
        """desispec.io.read_image reads what spexd-sim writes (READNOISE, RDNOISE keys)."""
        path = os.path.join(WORK, "sim-preproc.fits")
        subprocess.run([support.exe("spexd-sim"), f"--psf={dropin.PSF}", f"--out={path}",
                        "--fibers=0,5", "--wavelength=5760.0,6160.0,0.8", "--seed=3"],
                       check=True, stdout=subprocess.DEVNULL)
        image = desispec.io.read_image(path)
        with fits.open(path, memmap=False) as f:
            np.testing.assert_array_equal(image.pix, f["IMAGE"].data)
            np.testing.assert_array_equal(image.ivar, f["IVAR"].data)
            np.testing.assert_array_equal(image.mask, f["MASK"].data)
        self.assertEqual(image.readnoise.shape, image.pix.shape)
        self.assertTrue(np.all(image.readnoise > 0))
        self.assertEqual(image.camera, image.meta["CAMERA"].strip())


if __name__ == "__main__":
    unittest.main()
