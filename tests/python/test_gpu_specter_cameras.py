"""The b and z cameras against gpu_specter's own CPU path, as case A is for r.

Each case is made here, at test time, with spexd-sim from the synthetic b0 / z0 PSFs of
the reference data's psf/ (their README: r's spot shapes on desispec's b and z traces): fibres
0-49 (bundles 0 and 1) on the camera's DESI grid, Poisson and read noise, and defects as
in case A: HOT pixels (MASK only), a flagged cosmic track (MASK COSMIC) and an unflagged
2-pixel cosmic hit. gpu_specter's CPU path (gpu_specter.core.extract_frame with gpu=False,
what `spex` and desi_extract_spectra --no-gpu run) extracts it with its defaults and the
camera's psferr; spexd extracts it on a server with --reproduce gpu_specter_cpu and
mask_policy "any" (gpu_specter's read_img zeroes ivar where MASK != 0), float64 stream.

Bars (the spec's parity bar, "Decisions"): FLUX and IVAR within 1e-10 of each
spectrum's maximum, RESOLUTION 1e-10 absolute, PIXMASK_FRACTION 1e-12, CHI2PIX 1e-8
relative. The CPU backend always; the CUDA backend where a spexd with --backend=cuda
starts (skipped with the reason elsewhere).

z: with these traces the top rows of fibres 0-29 reach past the CCD at 9800-9824 A; there
gpu_specter's CPU path skips the patch (extraction-spec §2.6 step 5: flux = ivar = 0) and so
must spexd; the test checks that such bins exist and agree.

Grid: 800 A at each camera's far end (b 3600.0,4400.0,0.8: 1001 bins; z 9024.0,9824.0,0.8:
1001 bins, through the z CCD edge), so that gpu_specter's CPU path (~40 s per 50 spectra x
2326 bins on 2 quiet cores, several times that on a busy machine) stays short.
SPEXD_CAMERA_GRID=full runs the full DESI grids (b 3600.0,5800.0,0.8 / z 7520.0,9824.0,0.8).
Needs gpu_specter and numba (desispec_env.py: skipped, saying how to get them, where
absent, as in CI) and the reference data's psf/.
"""
import os
import re
import time
import unittest

import desispec_env

desispec_env.require("gpu_specter.core", "gpu_specter.io", "numba")

import numpy as np  # noqa: E402
from astropy.io import fits  # noqa: E402

import spexd  # noqa: E402
import support  # noqa: E402

SRC = os.environ.get("SPEXD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
PSF_DIR = os.path.abspath(os.path.join(SRC, "..", "shared", "data", "psf"))
NSPEC = 50
SHORT = os.environ.get("SPEXD_CAMERA_GRID", "") != "full"
# camera: PSF, DESI grid (desi_proc), the short grid (the default), psferr, seed.
CASES = {
    "b": ("psf-b0-synth.fits", (3600.0, 5800.0, 0.8), (3600.0, 4400.0, 0.8), 0.04, 21),
    "z": ("psf-z0-synth.fits", (7520.0, 9824.0, 0.8), (9024.0, 9824.0, 0.8), 0.01, 23),
}
BARS = {"flux": 1e-10, "ivar": 1e-10, "resolution": 1e-10, "pixmask_fraction": 1e-12,
        "chi2pix": 1e-8}
MASK_COSMIC = 16


def add_defects(path, seed):
    """Case A's defects besides the simulator's HOT pixels: a flagged cosmic track across
    a lit trace (MASK COSMIC, +4000 e-) and an unflagged 2-pixel hit (+3000 e-, MASK 0)."""
    rng = np.random.default_rng(seed)
    with fits.open(path, mode="update") as f:
        image = f["IMAGE"].data
        mask = f["MASK"].data.copy()
        h, w = image.shape
        lit = np.argwhere(image > 0.6 * np.percentile(image[image > 0], 99.5))
        lit = lit[(lit[:, 0] >= 10) & (lit[:, 0] < h - 10) & (lit[:, 1] >= 10) & (lit[:, 1] < w - 10)]
        y, x = lit[rng.integers(len(lit))]
        for k in range(-6, 7):  # a diagonal track of 13 pixels
            image[y + k, x + k // 2] += 4000.0
            mask[y + k, x + k // 2] |= MASK_COSMIC
        y2, x2 = lit[rng.integers(len(lit))]
        image[y2, x2:x2 + 2] += 3000.0
        f["MASK"].data = mask
        f.flush()
    return (int(y), int(x)), (int(y2), int(x2))


def run_gpu_specter(preproc, psf, grid, psferr):
    """gpu_specter's CPU path, float64 arrays, and its wall time."""
    from gpu_specter.core import extract_frame
    from gpu_specter.io import read_img, read_psf

    img = read_img(preproc)
    p = read_psf(psf)
    t0 = time.time()
    frame = extract_frame(img, p, 25, 0, NSPEC, ",".join(str(v) for v in grid), 50, 5,
                          None, 0.0, psferr, None, False, None,
                          wavepad=10, wavepad_frac=0.2, pixpad_frac=0.8)
    return frame, time.time() - t0


def deviations(ref, got):
    """Worst deviation of each array in the units of its bar's definition."""
    def per_spectrum(a, b):
        scale = np.max(np.abs(b), axis=1, keepdims=True)
        scale[scale == 0] = 1.0
        return float(np.max(np.abs(a - b) / scale))

    rel = np.abs(got.chi2pix - ref["chi2pix"])
    nz = rel > 0
    return {
        "flux": per_spectrum(got.flux, ref["specflux"]),
        "ivar": per_spectrum(got.ivar, ref["specivar"]),
        "resolution": float(np.max(np.abs(got.resolution_data - ref["Rdiags"]))),
        "pixmask_fraction": float(np.max(np.abs(got.pixmask_fraction - ref["pixmask_fraction"]))),
        "chi2pix": float(np.max(rel[nz] / np.maximum(np.abs(ref["chi2pix"][nz]), 1e-300)))
        if nz.any() else 0.0,
    }


def setUpModule():
    global CPU, CUDA, CUDA_WHY
    missing = [c[0] for c in CASES.values() if not os.path.exists(os.path.join(PSF_DIR, c[0]))]
    if missing:
        raise unittest.SkipTest(f"{PSF_DIR} lacks {missing}: the b0/z0 PSFs live in the reference data beside the clone "
                                "beside the clone")
    CPU = support.Server()
    CUDA, CUDA_WHY = cuda_server()


def cuda_server():
    """A spexd on the CUDA backend once its warm-up passed ("serving"), or None and why:
    without a device it listens, fails its warm-up and exits."""
    try:
        server = support.Server("--backend=cuda")
    except RuntimeError as e:
        return None, str(e).strip().splitlines()[-1][:300]
    deadline = time.time() + 300
    while time.time() < deadline:
        with open(server.log_path) as f:
            text = f.read()
        if '"event":"serving"' in text:
            return server, None
        failed = re.search(r'"event":"(?:warmup_failed|startup_failed)","error":"([^"]*)"', text)
        if failed or server.proc.poll() is not None:
            server.stop()
            return None, failed.group(1)[:300] if failed else "spexd --backend=cuda exited"
        time.sleep(0.1)
    server.stop()
    return None, "spexd --backend=cuda did not finish its warm-up in 300 s"


class CameraParityTest(unittest.TestCase):
    cases = {}

    @classmethod
    def case(cls, camera):
        """(preproc, psf, grid, psferr, gpu_specter frame), made once per camera."""
        if camera not in cls.cases:
            name, grid, short, psferr, seed = CASES[camera]
            grid = short if SHORT else grid
            d = support.work_dir()
            psf = os.path.join(d, name)
            if not os.path.exists(psf):
                os.symlink(os.path.join(PSF_DIR, name), psf)
            preproc = os.path.join(d, f"preproc-{camera}0.fits")
            support.run(support.exe("spexd-sim"), f"--psf={psf}", f"--out={preproc}",
                        f"--fibers=0,{NSPEC}", "--wavelength=" + ",".join(map(str, grid)),
                        f"--seed={seed}", "--hot_pixels=8", f"--camera={camera}0")
            add_defects(preproc, seed)
            frame, seconds = run_gpu_specter(preproc, psf, grid, psferr)
            print(f"[{camera}] gpu_specter CPU path: {seconds:.1f} s, {NSPEC} spectra x "
                  f"{len(frame['wave'])} bins, grid {grid}", flush=True)
            cls.cases[camera] = (preproc, psf, grid, psferr, frame)
        return cls.cases[camera]

    def check(self, camera, server, backend):
        preproc, psf, grid, psferr, ref = self.case(camera)
        t0 = time.time()
        with spexd.Client(server.target, deadline=600.0) as c:
            got = c.extract(server_path=preproc, psf=psf, wavelength=grid, specmin=0,
                            nspec=NSPEC, psferr=psferr, reproduce="gpu_specter_cpu",
                            mask_policy="any")
        seconds = time.time() - t0
        np.testing.assert_array_equal(got.wave, ref["wave"])
        self.assertEqual(got.flux.shape, ref["specflux"].shape)
        self.assertEqual(got.resolution_data.shape, ref["Rdiags"].shape)
        dev = deviations(ref, got)
        print(f"[{camera}] spexd {backend}: {seconds:.1f} s; " + ", ".join(
            f"{k} {v:.2e} (bar {BARS[k]:.0e})" for k, v in dev.items()), flush=True)
        for k, v in dev.items():
            self.assertLessEqual(v, BARS[k], f"{camera} {backend} {k}")
        return ref

    def test_b_cpu_backend(self):
        ref = self.check("b", CPU, "cpu")
        # The defects reached the extraction: masked pixels give pixmask_fraction > 0.
        self.assertGreater(np.count_nonzero(ref["pixmask_fraction"] > 0), 0)

    def test_z_cpu_backend(self):
        ref = self.check("z", CPU, "cpu")
        # Traces past the CCD top: gpu_specter's CPU path leaves those bins 0 (patch
        # skipped), only at the red end and only for the fibres that reach past it.
        zero = ref["specivar"] == 0
        self.assertGreater(np.count_nonzero(zero), 0, "no bin off the CCD: case lost its edge")
        wave = ref["wave"]
        self.assertGreaterEqual(wave[np.nonzero(zero.any(axis=0))[0].min()], 9700.0)
        self.assertTrue(zero[:30].any(axis=1).all(), "fibres 0-29 all reach past the CCD")

    def test_b_cuda_backend(self):
        if CUDA is None:
            self.skipTest(f"no CUDA backend here: {CUDA_WHY}")
        self.check("b", CUDA, "cuda")

    def test_z_cuda_backend(self):
        if CUDA is None:
            self.skipTest(f"no CUDA backend here: {CUDA_WHY}")
        self.check("z", CUDA, "cuda")


if __name__ == "__main__":
    unittest.main()
