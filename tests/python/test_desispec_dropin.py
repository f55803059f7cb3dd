"""spexd as a drop-in for desi_extract_spectra: `spexctl extract` (and the Python client
through a server) run with the argument lists desispec's own extraction was run with, on
case A, and every HDU and header key compared with desispec's outputs stored in
the reference data's desispec/ (README there: versions, argument lists, inputs).

What may differ, and why (also in docs/python-client.md, "desi_proc users"):
- CHECKSUM/DATASUM values (write time in the comments; data checked directly).
- IN_PSF/IN_IMG: the path as given (the stored files hold bare names).
- SPECTER: spexd's version, not gpu_specter's (the key says which code extracted).
- DEPNAMnn/DEPVERnn: each records its own software (desispec: python, numpy, ...,
  gpu_specter; spexd: spexd, cfitsio); the environment entries desiutil adds (DESI_ROOT,
  ..., DESIMODEL = NOT_SET here) must be equal, as must every key after them.
- Card comments are compared only for the keys desispec sets itself (see _COMMENTED).
- FLUX, IVAR, RESOLUTION, CHI2PIX: float32 values of float64 results that agree with
  gpu_specter to ~1e-12 relative (extraction-spec parity bar 1e-10): allowed |a - b| <=
  1e-6 * max|b| of the fibre (a few float32 ulps at the fibre's scale; measured: 0 for
  FLUX, IVAR and CHI2PIX, 1.2e-10 for RESOLUTION, 1.2e-7 with --barycentric-correction).
  SCORES (float64): relative 1e-9 (measured 4e-13), 2e-6 with --barycentric-correction
  (measured 6e-7: HELIOCOR differs by 1.0e-11, see check()). HELIOCOR: 1e-9.
  WAVELENGTH, MASK and FIBERMAP bytes: identical. The model image: 1e-9 of its maximum.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import support

SRC = os.environ.get("SPEXD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.path.abspath(os.path.join(SRC, "..", "shared"))
REF = os.path.join(SHARED, "data", "desispec")
PSF = os.path.join(SHARED, "data", "psf", "psf-r0-00051060.fits")
PREPROC = os.path.join(SHARED, "data", "caseA", "preproc.fits.gz")
MAKE_INPUT = os.path.join(SHARED, "tools", "make-desispec-input.py")

# The six argument lists of the README (B + variant), with D/OUT filled in by the test.
VARIANTS = {
    "default": [],
    "model": ["--model", "{D}/model-model.fits"],
    "bary": ["--barycentric-correction"],
    "fibermap": ["-f", "{OUT}/fibermap.fits"],
    "noscores": ["--no-scores"],
    "regularize": ["--regularize", "0.1"],
}
# Keys whose values legitimately differ (module docstring).
_OWN = {"CHECKSUM", "DATASUM", "IN_PSF", "IN_IMG", "SPECTER"}
# Keys desispec writes with its own comment: those comments must match.
_COMMENTED = {"NSPEC", "WAVEMIN", "WAVEMAX", "WAVESTEP", "IN_PSF"}
DESI_ENV = ("DESI_ROOT", "DESI_SPECTRO_DATA", "DESI_SPECTRO_REDUX", "SPECPROD",
            "DESI_SPECTRO_CALIB", "DESI_BASIS_TEMPLATES", "DESI_TARGET", "DESIMODEL",
            "DESI_ROOT_READONLY")


def _dep_entries(header):
    out = {}
    for i in range(100):
        if f"DEPNAM{i:02d}" in header:
            out[header[f"DEPNAM{i:02d}"]] = header[f"DEPVER{i:02d}"]
    return out


def compare_headers(ref, got, what, own=_OWN):
    """Differences between two headers beyond the module docstring's list (`own`: the
    keys whose values may differ)."""
    problems = []
    strip = lambda h: [c for c in h.cards if not c.keyword.startswith(("DEPNAM", "DEPVER"))
                       and c.keyword not in ("", "COMMENT", "HISTORY")]
    rc, gc = strip(ref), strip(got)
    if [c.keyword for c in rc] != [c.keyword for c in gc]:
        problems.append(f"{what}: keys differ:\n  desispec {[c.keyword for c in rc]}\n"
                        f"  spexd    {[c.keyword for c in gc]}")
        return problems
    for r, g in zip(rc, gc):
        if r.keyword in own:
            continue
        if r.keyword == "HELIOCOR":
            if abs(r.value - g.value) > 1e-9:
                problems.append(f"{what}: HELIOCOR {g.value!r} != {r.value!r} (1e-9)")
            continue
        if r.value != g.value or type(r.value) is not type(g.value):
            problems.append(f"{what}: {r.keyword} = {g.value!r}, desispec {r.value!r}")
        if r.keyword in _COMMENTED and r.comment != g.comment:
            problems.append(f"{what}: {r.keyword} comment {g.comment!r}, desispec {r.comment!r}")
    if [c.value for c in ref.cards if c.keyword == "COMMENT"] != \
            [c.value for c in got.cards if c.keyword == "COMMENT"]:
        problems.append(f"{what}: COMMENT cards differ")
    env_ref = {k: v for k, v in _dep_entries(ref).items() if k in DESI_ENV}
    env_got = {k: v for k, v in _dep_entries(got).items() if k in DESI_ENV}
    if env_ref != env_got:
        problems.append(f"{what}: environment provenance {env_got}, desispec {env_ref}")
    return problems


def compare_files(ref_path, got_path, tol, scores_rtol=1e-9, own=_OWN):
    from astropy.io import fits

    problems = []
    with fits.open(ref_path) as ref, fits.open(got_path) as got:
        rn, gn = [h.name for h in ref], [h.name for h in got]
        if rn != gn:
            return [f"HDUs {gn}, desispec {rn}"]
        for r, g in zip(ref, got):
            problems += compare_headers(r.header, g.header, r.name, own)
            if r.data is None:
                continue
            if r.name == "FIBERMAP" or isinstance(r, fits.BinTableHDU) and r.name != "SCORES":
                # Raw row bytes: NUL-padded strings, as desispec (fitsio/astropy) writes them.
                if np.asarray(r.data).tobytes() != np.asarray(g.data).tobytes():
                    problems.append(f"{r.name}: table bytes differ")
            elif r.name == "SCORES":
                for col in r.columns.names:
                    a, b = g.data[col], r.data[col]
                    if not np.allclose(a, b, rtol=scores_rtol, atol=0):
                        problems.append(f"SCORES {col}: max rel diff "
                                        f"{np.max(np.abs(a - b) / np.abs(b))}")
            elif r.name in ("WAVELENGTH", "MASK"):
                if r.data.dtype != g.data.dtype or not np.array_equal(r.data, g.data):
                    problems.append(f"{r.name}: values differ")
            else:
                a, b = g.data.astype(np.float64), r.data.astype(np.float64)
                if a.shape != b.shape or r.data.dtype != g.data.dtype:
                    problems.append(f"{r.name}: {g.data.dtype}{a.shape}, desispec "
                                    f"{r.data.dtype}{b.shape}")
                    continue
                if b.ndim >= 2 and r.name != "IMAGE":
                    scale = np.max(np.abs(b.reshape(b.shape[0], -1)), axis=1)
                    scale = scale.reshape((-1,) + (1,) * (b.ndim - 1))
                else:
                    scale = np.max(np.abs(b))
                worst = np.max(np.abs(a - b) / np.maximum(scale, 1e-300))
                if worst > tol:
                    problems.append(f"{r.name}: max diff {worst:.3g} of the fibre maximum "
                                    f"(tolerance {tol:g})")
    return problems


@unittest.skipUnless(os.path.isdir(REF) and os.path.exists(MAKE_INPUT),
                     f"{REF} absent: the desispec reference outputs live in the reference data beside the clone "
                     "beside the clone (development and CI machines)")
class DesispecDropinTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="spexd-desi-", dir=support.work_dir())
        subprocess.run([sys.executable, MAKE_INPUT, "--preproc", PREPROC, "--outdir", cls.out],
                       check=True)
        cls.env = {k: v for k, v in os.environ.items() if k not in DESI_ENV}

    def args(self, name, outdir):
        base = ["-i", f"{self.out}/preproc-desi.fits", "-p", PSF, "-s", "0", "-n", "25",
                "-w", "5760.0,6160.0,0.8", "--no-gpu", "-o", f"{outdir}/frame-{name}.fits"]
        return base + [a.format(D=outdir, OUT=self.out) for a in VARIANTS[name]]

    def check(self, name, outdir):
        # --barycentric-correction: spexd's factor is desispec's to 1.0e-11 (UT1-UTC and
        # polar motion, which need IERS tables, are taken as 0), which moves the grid by
        # 6e-8 A: FLUX etc. then differ by up to 1.2e-7 of the fibre maximum, the SCORES
        # medians by 6e-7 relative.
        problems = compare_files(os.path.join(REF, f"frame-{name}.fits.gz"),
                                 os.path.join(outdir, f"frame-{name}.fits"), tol=1e-6,
                                 scores_rtol=2e-6 if name == "bary" else 1e-9)
        if name == "model":
            problems += [f"model: {p}" for p in compare_files(
                os.path.join(REF, "model-model.fits.gz"), os.path.join(outdir, "model-model.fits"),
                tol=1e-9)]
        self.assertEqual(problems, [], f"{name}: " + "\n".join(problems))

    def test_spexctl_local(self):
        outdir = tempfile.mkdtemp(dir=self.out)
        for name in VARIANTS:
            with self.subTest(variant=name):
                subprocess.run([support.exe("spexctl"), "extract", "--local", "-q",
                                *self.args(name, outdir)], check=True, env=self.env)
                self.check(name, outdir)

    def test_spexctl_through_server(self):
        server = support.Server()
        outdir = tempfile.mkdtemp(dir=self.out)
        for name in VARIANTS:
            with self.subTest(variant=name):
                subprocess.run([support.exe("spexctl"), "extract", "-q",
                                "--server", f"127.0.0.1:{server.port}",
                                *self.args(name, outdir)], check=True, env=self.env)
                self.check(name, outdir)

    def test_python_client(self):
        import spexd

        server = support.Server()
        outdir = tempfile.mkdtemp(dir=self.out)
        kwargs = {"default": {}, "model": {"want_model": True},
                  "bary": {"barycentric_correction": True},
                  "fibermap": {"fibermap_path": f"{self.out}/fibermap.fits"},
                  "noscores": {"no_scores": True}, "regularize": {"regularize": 0.1}}
        saved = {k: os.environ.pop(k) for k in DESI_ENV if k in os.environ}
        try:
            with spexd.Client(f"127.0.0.1:{server.port}") as client:
                for name, extra in kwargs.items():
                    with self.subTest(variant=name):
                        result = client.extract(server_path=f"{self.out}/preproc-desi.fits",
                                                psf=PSF, specmin=0, nspec=25,
                                                wavelength=(5760.0, 6160.0, 0.8),
                                                reproduce="gpu_specter_cpu",
                                                **extra)
                        result.write(f"{outdir}/frame-{name}.fits",
                                     model_path=f"{outdir}/model-model.fits"
                                     if name == "model" else None)
                        self.check(name, outdir)
        finally:
            os.environ.update(saved)

    def test_spexd_desi_extract(self):
        # The console entry point with desi_extract_spectra's command line, unchanged:
        # locally (no server: spexctl --local) and on a server (--server; files uploaded).
        server = support.Server()
        env = dict(self.env, PATH=support.path_with_spexctl(self.env.get("PATH", "")))
        for name, extra in (("default", []), ("bary", ["--server", server.target]),
                            ("model", ["--server", server.target])):
            with self.subTest(variant=name, server=bool(extra)):
                outdir = tempfile.mkdtemp(dir=self.out)
                r = subprocess.run([sys.executable, "-m", "spexd.desi", *self.args(name, outdir),
                                    *extra], env=env, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("extracting on spexd server" if extra else "extracting locally",
                              r.stderr)
                self.check(name, outdir)
        # An unreachable server: said in the log, and the job runs locally.
        outdir = tempfile.mkdtemp(dir=self.out)
        r = subprocess.run([sys.executable, "-m", "spexd.desi", *self.args("noscores", outdir)],
                           env=dict(env, SPEXD_SERVER="127.0.0.1:1"), capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("not reachable", r.stderr)
        self.check("noscores", outdir)

    def test_barycentric_needs_the_keys(self):
        # desispec's KeyError message, naming the key, for a header without RA/TARGTRA.
        outdir = tempfile.mkdtemp(dir=self.out)
        from astropy.io import fits
        src = os.path.join(support.work_dir(), "no-ra.fits")
        with fits.open(f"{self.out}/preproc-desi.fits") as f:
            for key in ("RA", "TARGTRA"):
                del f["IMAGE"].header[key]
            f.writeto(src, overwrite=True)
        args = self.args("bary", outdir)
        args[1] = src
        r = subprocess.run([support.exe("spexctl"), "extract", "--local", "-q", *args],
                           capture_output=True, text=True, env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Barycentric corr requires (TARGT)RA in HDU 0 or fibermap", r.stderr)
        with fits.open(src) as f:
            del f["IMAGE"].header["MJD-OBS"]
            f["IMAGE"].header["RA"] = 150.1
            f.writeto(src, overwrite=True)
        r = subprocess.run([support.exe("spexctl"), "extract", "--local", "-q", *args],
                           capture_output=True, text=True, env=self.env)
        self.assertIn("no MJD-OBS nor MJD in header", r.stderr)
        # The server: INVALID_ARGUMENT with the same message, and it keeps serving.
        import spexd
        server = support.Server()
        with spexd.Client(server.target, retries=1) as client:
            with self.assertRaisesRegex(spexd.InvalidArgument, "no MJD-OBS nor MJD in header"):
                client.extract(server_path=src, psf=PSF, specmin=0, nspec=25,
                               wavelength=(5760.0, 6160.0, 0.8), barycentric_correction=True)
            self.assertTrue(client.server_info().version)


if __name__ == "__main__":
    unittest.main()
