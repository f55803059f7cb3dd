"""desispec's extraction script (desi_extract_spectra, gpu_specter's CPU path with --no-gpu)
and spexd-desi-extract run here with the same command lines, on case A (fibres 0-24,
5760-6160 A): default, --model, --barycentric-correction, -f/--fibermap, --no-scores and
--regularize 0.1; spexd-desi-extract once locally and once on a server ($SPEXD_SERVER, so
that the command line stays the same). Every HDU and header key is compared
(test_desispec_dropin.compare_files).

Differences that remain, and why (each run prints what it measured):
- SPECTER names the code that extracted: gpu_specter's version, spexd's.
- DEPNAMnn/DEPVERnn: each records its own software stack (desispec: python, numpy, ...,
  gpu_specter; spexd: spexd, cfitsio, or the Python writer's modules); the environment
  entries (DESI_ROOT .. DESIMODEL) must be equal.
- CHECKSUM/DATASUM: their comments hold the write time.
- FLUX, IVAR, RESOLUTION, CHI2PIX: float32 of float64 results equal to ~1e-12 (allowed 1e-6
  of the fibre maximum); SCORES 1e-9 relative; with --barycentric-correction spexd's
  HELIOCOR is desispec's to ~1e-11 (UT1-UTC and polar motion taken as 0; desispec's
  astropy uses its bundled IERS table here, offline), which moves the grid by ~6e-8 A:
  SCORES 2e-6 relative. IN_PSF and IN_IMG are compared: same command line, same values.
Also, where the stack is at the commits that made the reference data's desispec/, desispec's
run here must reproduce those stored files (data bit for bit): the stack is the one the
references came from. Needs desispec, gpu_specter and numba (desispec_env.py: skipped,
saying how to get them, where absent, as in CI).
"""
import os
import subprocess
import sys
import tempfile
import unittest

import desispec_env

desispec_env.require("desispec.scripts.extract", "gpu_specter.core", "numba")

import numpy as np  # noqa: E402

import support  # noqa: E402
import test_desispec_dropin as dropin  # noqa: E402

# The versions desiutil.depend recorded in the reference data's desispec/ (its README).
REFERENCE_STACK = {"desispec": "0.71.6.dev10155", "gpu_specter": "0.3.0.dev412",
                   "numpy": "1.24.2", "astropy": "5.2.1"}
OWN = {"CHECKSUM", "DATASUM", "SPECTER"}


def setUpModule():
    global WORK, SERVER, ENV, DESI_RUNS
    if not os.path.isdir(dropin.REF) or not os.path.exists(dropin.MAKE_INPUT):
        raise unittest.SkipTest(f"{dropin.REF} absent: the fixtures live in the reference data beside the clone "
                                "beside the clone")
    WORK = tempfile.mkdtemp(prefix="spexd-desi-x-", dir=support.work_dir())
    subprocess.run([sys.executable, dropin.MAKE_INPUT, "--preproc", dropin.PREPROC,
                    "--outdir", WORK], check=True)
    ENV = desispec_env.subprocess_env(
        {k: v for k, v in os.environ.items() if k not in dropin.DESI_ENV})
    ENV["PATH"] = support.path_with_spexctl(ENV.get("PATH", ""))
    SERVER = support.Server()
    DESI_RUNS = {}
    print("desispec stack:", desispec_env.versions(), flush=True)


def command_line(name, outdir):
    """desi_extract_spectra's arguments for one option set (the README's lists)."""
    return (["-i", f"{WORK}/preproc-desi.fits", "-p", dropin.PSF, "-s", "0", "-n", "25",
             "-w", "5760.0,6160.0,0.8", "--no-gpu", "-o", f"{outdir}/frame-{name}.fits"]
            + [a.format(D=outdir, OUT=WORK) for a in dropin.VARIANTS[name]])


def run_desispec(name):
    """desispec's own run of one option set (once per test process): its output folder."""
    if name not in DESI_RUNS:
        outdir = tempfile.mkdtemp(prefix=f"desispec-{name}-", dir=WORK)
        script = desispec_env.script("desi_extract_spectra")
        entry = [script] if script else [
            "-c", "import sys; from desispec.scripts.extract import main, parse; "
                  "sys.exit(main(parse(sys.argv[1:])))"]
        r = subprocess.run([sys.executable, *entry, *command_line(name, outdir)], env=ENV,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"desi_extract_spectra {name} failed:\n{r.stderr[-3000:]}")
        DESI_RUNS[name] = outdir
    return DESI_RUNS[name]


def measured(ref_path, got_path):
    """What differs, for the log: max |a-b| / fibre max per image HDU, SCORES max
    relative difference, and the header keys whose values differ."""
    from astropy.io import fits

    out = []
    with fits.open(ref_path) as ref, fits.open(got_path) as got:
        for r, g in zip(ref, got):
            keys = sorted({"DEPNAMnn/DEPVERnn" if c.keyword.startswith(("DEPNAM", "DEPVER"))
                           else c.keyword for c in r.header.cards
                           if c.keyword in g.header and c.keyword not in ("COMMENT", "")
                           and r.header[c.keyword] != g.header[c.keyword]})
            if r.name == "SCORES":
                d = max(float(np.max(np.abs(g.data[c] - r.data[c]) / np.abs(r.data[c])))
                        for c in r.columns.names)
            elif isinstance(r, fits.BinTableHDU) or r.data is None:
                d = 0.0 if r.data is None or r.data.tobytes() == g.data.tobytes() else None
            else:
                a, b = g.data.astype(np.float64), r.data.astype(np.float64)
                d = float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))
            out.append(f"{r.name}: {d if d is None else f'{d:.2g}'} keys {keys}")
    return "; ".join(out)


class DesispecExtractionTest(unittest.TestCase):
    def compare(self, name, desi_dir, spexd_dir, how):
        problems = dropin.compare_files(
            os.path.join(desi_dir, f"frame-{name}.fits"),
            os.path.join(spexd_dir, f"frame-{name}.fits"), tol=1e-6,
            scores_rtol=2e-6 if name == "bary" else 1e-9, own=OWN)
        if name == "model":
            problems += [f"model: {p}" for p in dropin.compare_files(
                os.path.join(desi_dir, "model-model.fits"),
                os.path.join(spexd_dir, "model-model.fits"), tol=1e-9, own=OWN)]
        print(f"{how} {name}: " + measured(os.path.join(desi_dir, f"frame-{name}.fits"),
                                            os.path.join(spexd_dir, f"frame-{name}.fits")),
              flush=True)
        self.assertEqual(problems, [], f"{how} {name}: " + "\n".join(problems))

    def spexd(self, name, server):
        outdir = tempfile.mkdtemp(prefix=f"spexd-{name}-", dir=WORK)
        env = dict(ENV, SPEXD_SERVER=SERVER.target) if server else ENV
        r = subprocess.run([sys.executable, "-m", "spexd.desi", *command_line(name, outdir)],
                           env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("extracting on spexd server" if server else "extracting locally",
                      r.stderr)
        return outdir

    def test_same_command_lines_locally(self):
        for name in dropin.VARIANTS:
            with self.subTest(variant=name):
                self.compare(name, run_desispec(name), self.spexd(name, False), "local")

    def test_same_command_lines_on_a_server(self):
        for name in dropin.VARIANTS:
            with self.subTest(variant=name):
                self.compare(name, run_desispec(name), self.spexd(name, True), "server")

    def test_without_no_gpu_on_this_node(self):
        # The same command lines without --no-gpu: desispec decides by this node (no GPU
        # usable by cupy and numba.cuda: gpu_specter's CPU path) and spexd-desi-extract by
        # desispec's own rule, here through desispec.gpu itself (the stack is on the path).
        # CHI2PIX and MASK (and everything else) must agree, locally and on a server.
        env = {k: v for k, v in ENV.items() if k not in ("SPEXD_DESI_GPU", "DESI_NO_GPU")}
        probe = subprocess.run([sys.executable, "-c", "import desispec.gpu as g; "
                                "print(g.is_gpu_available())"], env=env,
                               capture_output=True, text=True)
        self.assertEqual(probe.returncode, 0, probe.stderr)
        if probe.stdout.strip() != "False":
            self.skipTest("desispec sees a usable GPU here: its GPU path is not compared")
        for name in ("default", "regularize"):
            desi_dir = tempfile.mkdtemp(prefix=f"desispec-gpurule-{name}-", dir=WORK)
            argv = [a for a in command_line(name, desi_dir) if a != "--no-gpu"]
            script = desispec_env.script("desi_extract_spectra")
            entry = [script] if script else [
                "-c", "import sys; from desispec.scripts.extract import main, parse; "
                      "sys.exit(main(parse(sys.argv[1:])))"]
            r = subprocess.run([sys.executable, *entry, *argv], env=env, capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            for server in (False, True):
                with self.subTest(variant=name, server=server):
                    out = tempfile.mkdtemp(prefix=f"spexd-gpurule-{name}-", dir=WORK)
                    r = subprocess.run(
                        [sys.executable, "-m", "spexd.desi",
                         *[a.replace(desi_dir, out) for a in argv]],
                        env=dict(env, SPEXD_SERVER=SERVER.target) if server else env,
                        capture_output=True, text=True)
                    self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                    self.assertIn("reproducing gpu_specter's CPU path, as desispec on this "
                                  "node (desispec.gpu: no GPU usable by cupy and numba.cuda)",
                                  r.stderr)
                    self.compare(name, desi_dir, out, "no --no-gpu, server" if server
                                 else "no --no-gpu, local")

    def test_main_gpu_specter_with_desispecs_namespace(self):
        # As desi_proc calls it: desispec.scripts.extract.parse(cmdargs), then
        # main_gpu_specter(args, comm=...) of spexd.desi in place of desispec's.
        code = f"""
import sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
import desispec.scripts.extract as ex
from spexd import desi
from test_desi_semantics import FakeComm
args = ex.parse(sys.argv[1:])
assert not hasattr(args, "server")
comm = FakeComm(rank=0, size=1)
timing = {{}}
desi.main_gpu_specter(args, comm=comm, timing=timing)
assert comm.sent == [None], comm.sent
assert set(timing) == {{"frame-start", "frame-write"}}, timing
args = ex.parse(sys.argv[1:] + ["-n", "30"])
try:
    desi.main_gpu_specter(args)
except ValueError as e:
    print("refused:", e)
"""
        for name in ("default", "model"):
            with self.subTest(variant=name):
                out = tempfile.mkdtemp(prefix=f"spexd-proc-{name}-", dir=WORK)
                r = subprocess.run([sys.executable, "-c", code, *command_line(name, out)],
                                   env=ENV, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                self.assertIn("refused: nspec (30) must be evenly divisible by bundlesize",
                              r.stdout)
                self.compare(name, run_desispec(name), out, "main_gpu_specter")

    def test_desispec_here_reproduces_the_stored_references(self):
        have = desispec_env.versions()
        if any(not have.get(k, "").startswith(v) for k, v in REFERENCE_STACK.items()):
            self.skipTest(f"stack {have} is not the one that made {dropin.REF} "
                          f"({REFERENCE_STACK})")
        from astropy.io import fits

        for name in dropin.VARIANTS:
            with self.subTest(variant=name):
                own = {"CHECKSUM", "DATASUM", "IN_PSF", "IN_IMG"}
                problems = dropin.compare_files(
                    os.path.join(dropin.REF, f"frame-{name}.fits.gz"),
                    os.path.join(run_desispec(name), f"frame-{name}.fits"), tol=0,
                    scores_rtol=0, own=own)
                self.assertEqual(problems, [], f"{name}: " + "\n".join(problems))
                with fits.open(os.path.join(run_desispec(name), f"frame-{name}.fits")) as f:
                    self.assertEqual(f[0].header["IN_IMG"], f"{WORK}/preproc-desi.fits")


if __name__ == "__main__":
    unittest.main()
