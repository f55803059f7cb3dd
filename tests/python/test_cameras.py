"""The b and z cameras through the command-line tools, without a server: spexd-sim takes
each PSF's CCD (NPIX) and its arm's DESI grid, writes PSF stand-ins with moved traces, and
`spexctl extract -v` without -w reports the grid it extracts (the PSF's domain, not the r
camera's default). Uses the synthetic b0 / z0 PSFs of the reference data's psf/ (skipped where
absent). ~10 s on 2 cores.
"""
import os
import re
import subprocess
import unittest

import numpy as np
from astropy.io import fits

import support

SRC = os.environ.get("SPEXD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
PSF_DIR = os.path.abspath(os.path.join(SRC, "..", "shared", "data", "psf"))
B_PSF = os.path.join(PSF_DIR, "psf-b0-synth.fits")
Z_PSF = os.path.join(PSF_DIR, "psf-z0-synth.fits")


def setUpModule():
    for p in (B_PSF, Z_PSF):
        if not os.path.exists(p):
            raise unittest.SkipTest(f"{p} absent: the b0/z0 PSFs live in the reference data beside the clone")


def sim(*args):
    r = subprocess.run([support.exe("spexd-sim"), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"spexd-sim {args} failed: {r.stderr}")
    return r.stdout


class CameraToolsTest(unittest.TestCase):
    def test_simulator_takes_each_camera_ccd_and_grid(self):
        d = support.work_dir()
        for psf, camera, ccd, first, last in ((B_PSF, "b0", (4096, 4096), 3600.0, 5800.0),
                                              (Z_PSF, "z0", (4128, 4114), 7520.0, 9824.0)):
            out = os.path.join(d, f"sim-{camera}.fits")
            truth = os.path.join(d, f"truth-{camera}.fits")
            text = sim(f"--psf={psf}", f"--out={out}", f"--truth={truth}", "--fibers=0,25",
                       "--seed=3", f"--camera={camera}", "--threads=2")
            self.assertIn(f"{ccd[0]}x{ccd[1]} CCD", text)
            with fits.open(out) as f:
                self.assertEqual(f["IMAGE"].data.shape, ccd)
                self.assertEqual(f["IMAGE"].header["CAMERA"].strip(), camera)
            with fits.open(truth) as f:
                wave = f["WAVELENGTH"].data
                self.assertEqual(wave[0], first)
                self.assertAlmostEqual(wave[-1], last, places=6)
                self.assertEqual(len(wave), round((last - first) / 0.8) + 1)

    def test_simulator_writes_psf_stand_ins_with_moved_traces(self):
        d = support.work_dir()
        moved = os.path.join(d, "psf-z3.fits")
        sim(f"--psf={Z_PSF}", f"--out={os.path.join(d, 'sim-z3.fits')}", "--fibers=0,25",
            "--shift_traces=0.5,1", f"--psf_out={moved}", "--threads=2")
        with fits.open(Z_PSF) as a, fits.open(moved) as b:
            for hdu, shift in (("XTRACE", 0.5), ("YTRACE", 1.0)):
                np.testing.assert_array_equal(b[hdu].data[:, 0], a[hdu].data[:, 0] + shift)
                np.testing.assert_array_equal(b[hdu].data[:, 1:], a[hdu].data[:, 1:])
            np.testing.assert_array_equal(b["PSF"].data["COEFF"], a["PSF"].data["COEFF"])
        r = subprocess.run([support.exe("spexd-sim"), f"--psf={Z_PSF}", "--out=x.fits",
                            "--shift_traces=1"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--shift_traces=dx,dy needs two numbers and --psf_out", r.stderr)

    def test_verbose_extract_reports_the_grid_it_uses(self):
        """No -w: the PSF's whole domain at 0.8 A (3509.0-5993.8 for b), and -v says so."""
        d = support.work_dir()
        pre = os.path.join(d, "pre-b0.fits")
        sim(f"--psf={B_PSF}", f"--out={pre}", "--fibers=0,25", "--seed=4", "--threads=2")
        out = os.path.join(d, "frame-b0.fits")
        r = subprocess.run([support.exe("spexctl"), "extract", "--local", "-v", "-q", "-i", pre,
                            "-p", B_PSF, "-n", "25", "--cpu-threads", "2", "-o", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"wavelength = ([0-9.e+-]+),([0-9.e+-]+),([0-9.e+-]+) \(extraction grid\)",
                      r.stderr)
        self.assertIsNotNone(m, r.stderr)
        self.assertEqual(m.group(0), "wavelength = 3509,5994,0.8 (extraction grid)")  # shortest
        wmin, wmax, dw = map(float, m.groups())
        self.assertEqual((wmin, wmax, dw), (3509.0, 5994.0, 0.8))
        with fits.open(out) as f:
            wave = f["WAVELENGTH"].data
        self.assertEqual(wave[0], wmin)
        self.assertEqual(len(wave), len(np.arange(wmin, wmax + dw / 2, dw)))
        self.assertAlmostEqual(wave[-1], 5993.8, places=6)


if __name__ == "__main__":
    unittest.main()
