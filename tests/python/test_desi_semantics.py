"""spexd-desi-extract and spexd.desi as desispec's extraction script, without desispec:

- which gpu_specter path the numbers reproduce follows desispec's rule (--no-gpu,
  $DESI_NO_GPU, a usable GPU), whatever backend does the work; on a node without a GPU the
  same command line as desi_extract_spectra (no --no-gpu) gives desispec's CHI2PIX and
  MASK (desispec's stored --no-gpu outputs in the reference data's desispec/: on such a node
  desispec runs gpu_specter's CPU path with or without the flag);
- --use-specter (classic specter) is refused naming the difference, by spexctl too;
- main_gpu_specter(args, comm=..., coordinator=...) takes desispec's parsed namespace
  (no --server in it), runs the extraction once per communicator (rank 0), and raises on
  failure on every rank;
- local mode without spexctl fails with one clear line, no traceback;
- FITS long strings: a preproc with 120-character header values, a CONTINUE card and
  LONGSTRN, under a path longer than 68 characters, goes through every path (spexctl
  locally, spexctl --server, the server's own file, spexd-desi-extract locally and with
  --server, the Python writer) and the frame keeps every value whole.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

import support
import test_desispec_dropin as dropin

from spexd import desi


def desispec_namespace(**over):
    """What desispec.scripts.extract.parse() returns (the pinned desispec's options, their
    defaults): no `server`, as desi_proc passes it."""
    ns = dict(input=None, fibermap=None, psf=None, output=None, model=None, wavelength=None,
              specmin=0, nspec=None, regularize=0.0, bundlesize=25, nsubbundles=5,
              nwavestep=50, verbose=False, mpi=False, decorrelate_fibers=False,
              no_scores=False, psferr=None, barycentric_correction=False, use_specter=False,
              no_gpu=False, pixpad_frac=0.8, wavepad_frac=0.2)
    ns.update(over)
    return argparse.Namespace(**ns)


class FakeComm:
    """An MPI communicator's rank, size and bcast, for one rank of a job (mpi4py is not
    needed). `root_says` is what rank 0 broadcasts when this is another rank."""

    def __init__(self, rank, size=2, root_says=None):
        self.rank, self.size, self.root_says, self.sent = rank, size, root_says, []

    def bcast(self, obj, root=0):
        assert root == 0
        if self.rank == 0:
            self.sent.append(obj)
            return obj
        return self.root_says


class GpuRuleTest(unittest.TestCase):
    def setUp(self):
        saved = {k: os.environ.pop(k) for k in ("DESI_NO_GPU", "SPEXD_DESI_GPU")
                 if k in os.environ}
        self.addCleanup(os.environ.update, saved)

    def rule(self, no_gpu=False, gpu=True):
        return desi.gpu_semantics(desispec_namespace(no_gpu=no_gpu),
                                  probe=lambda: (gpu, "test probe"))

    def test_desispec_rule(self):
        self.assertEqual(self.rule(gpu=True), ("gpu_specter_gpu", "test probe"))
        self.assertEqual(self.rule(gpu=False), ("gpu_specter_cpu", "test probe"))
        self.assertEqual(self.rule(no_gpu=True, gpu=True)[0], "gpu_specter_cpu")
        os.environ["DESI_NO_GPU"] = ""  # desispec.gpu tests presence, not the value
        self.assertEqual(self.rule(gpu=True), ("gpu_specter_cpu", "$DESI_NO_GPU is set"))

    def test_probe_override_and_desispec_gpu(self):
        os.environ["SPEXD_DESI_GPU"] = "1"
        self.assertEqual(desi.gpu_probe(), (True, "$SPEXD_DESI_GPU=1"))
        os.environ["SPEXD_DESI_GPU"] = "yes"
        with self.assertRaises(desi.DesiExtractError):
            desi.gpu_probe()
        del os.environ["SPEXD_DESI_GPU"]
        # Where desispec imports, its own desispec.gpu decides (cupy, numba.cuda, NoGPU).
        fake = type(sys)("desispec.gpu")
        fake._cupy_available = fake._numba_cuda_available = fake._context_use_gpu = True
        pkg = type(sys)("desispec")
        pkg.gpu = fake
        with mock.patch.dict(sys.modules, {"desispec": pkg, "desispec.gpu": fake}):
            self.assertTrue(desi.gpu_probe()[0])
            fake._context_use_gpu = False  # inside desispec.gpu.NoGPU()
            self.assertFalse(desi.gpu_probe()[0])
            fake._context_use_gpu, fake._numba_cuda_available = True, False
            self.assertFalse(desi.gpu_probe()[0])

    def test_device_nodes(self):
        # A GPU node's rule counts the driver's numbered nodes beside a usable nvidiactl
        # instead of initialising the driver; its other nodes are not GPUs.
        dev = tempfile.mkdtemp(dir=support.work_dir())
        for name in ("nvidia0", "nvidia1", "nvidia-uvm", "nvidia-modeset", "nvidia12"):
            open(os.path.join(dev, name), "w").close()
        self.assertEqual(desi.usable_device_nodes(dev), 0)  # no nvidiactl
        open(os.path.join(dev, "nvidiactl"), "w").close()
        os.mkdir(os.path.join(dev, "nvidia-caps"))
        self.assertEqual(desi.usable_device_nodes(dev), 3)
        self.assertEqual(desi.usable_device_nodes(os.path.join(dev, "absent")), 0)
        shutil.rmtree(dev)

    def test_spexctl_gets_the_decision(self):
        args = desi._adopt(desispec_namespace(input="i.fits", psf="p.fits", output="o.fits",
                                              no_gpu=True, nspec=25))
        cmd = desi.spexctl_args(args, "gpu_specter_cpu", "cpu")
        self.assertEqual(cmd[cmd.index("--reproduce") + 1], "gpu_specter_cpu")
        self.assertEqual(cmd[cmd.index("--backend") + 1], "cpu")
        self.assertNotIn("--no-gpu", cmd)
        self.assertEqual(desi.local_backend(args, "/nonexistent/spexctl"), ("cpu", "--no-gpu"))

    def test_local_backend(self):
        # The GPU where the driver sees one and spexctl's CUDA module is installed.
        args = desi._adopt(desispec_namespace(input="i", psf="p", output="o"))
        module = os.path.join(support.work_dir(), "libspexd_cuda.so")
        open(module, "w").close()
        with mock.patch.object(desi, "_driver_gpus", lambda: (2, "2 devices")):
            with mock.patch.dict(os.environ, {"SPEXD_CUDA_MODULE": module}):
                self.assertEqual(desi.local_backend(args, "/nonexistent/spexctl"),
                                 ("cuda", "2 devices"))
                os.environ["DESI_NO_GPU"] = "1"
                self.assertEqual(desi.local_backend(args, "/nonexistent/spexctl")[0], "cpu")
                del os.environ["DESI_NO_GPU"]
            with mock.patch.dict(os.environ, {"SPEXD_CUDA_MODULE": module + ".absent"}):
                backend, why = desi.local_backend(args, "/nonexistent/spexctl")
                self.assertEqual(backend, "cpu")
                self.assertIn("no CUDA module", why)
        with mock.patch.object(desi, "_driver_gpus", lambda: (0, "no CUDA driver")):
            self.assertEqual(desi.local_backend(args, "/nonexistent/spexctl"),
                             ("cpu", "no CUDA driver"))

    def test_desispec_option_checks(self):
        with self.assertRaisesRegex(ValueError, "must be evenly divisible by bundlesize"):
            desi.main_gpu_specter(desispec_namespace(input="i", psf="p", output="o", nspec=30))
        with self.assertRaisesRegex(ValueError, "decorrelate-fibers"):
            desi.main_gpu_specter(desispec_namespace(input="i", psf="p", output="o",
                                                     decorrelate_fibers=True))


class UseSpecterTest(unittest.TestCase):
    def test_refused_naming_the_difference(self):
        r = subprocess.run([sys.executable, "-m", "spexd.desi", "-i", "i.fits", "-p", "p.fits",
                            "-o", os.path.join(support.work_dir(), "never.fits"),
                            "--use-specter"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("classic specter", r.stderr)
        self.assertIn("0.115 sigma", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        with self.assertRaisesRegex(desi.DesiExtractError, "0.115 sigma"):
            desi.main_mpi(desispec_namespace(use_specter=True), comm=None)
        r = subprocess.run([support.exe("spexctl"), "extract", "--local", "-i", "i.fits",
                            "-p", "p.fits", "-o", "o.fits", "--use-specter"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("0.115 sigma", r.stderr)


class MissingSpexctlTest(unittest.TestCase):
    def test_one_clear_line(self):
        installed = [c for c in (os.path.join(sys.prefix, "bin", "spexctl"), "/usr/local/bin/spexctl")
                     if os.path.exists(c)]
        if installed:
            self.skipTest(f"spexctl is installed ({installed[0]}): its absence cannot be shown")
        env = {k: v for k, v in os.environ.items() if k != "SPEXD_SERVER"}
        env["PATH"] = support.work_dir()  # no spexctl there
        inp = support.inputs()
        r = subprocess.run([sys.executable, "-m", "spexd.desi", "-i", inp["preproc"], "-p",
                            inp["psf"], "-o", os.path.join(support.work_dir(), "x.fits"),
                            "-n", "25"], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("spexctl, which a local extraction runs, was not found", r.stderr)
        self.assertIn("put them on PATH", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


class InProcessLogTest(unittest.TestCase):
    """desi_proc's in-process call: the lines saying which gpu_specter path and where go to
    desispec's log (desiutil.log.get_logger(), a stand-in here), and a failure raises an
    error whose message says why (it was only on stderr)."""

    def setUp(self):
        import logging

        self.records = []
        logger = logging.getLogger("test-desiutil-stand-in")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        records = self.records

        class Keep(logging.Handler):
            def emit(self, record):
                records.append(record.getMessage())

        handler = Keep()
        logger.addHandler(handler)
        self.addCleanup(logger.removeHandler, handler)
        log_module = type(sys)("desiutil.log")
        log_module.get_logger = lambda *a, **k: logger
        pkg = type(sys)("desiutil")
        pkg.log = log_module
        patcher = mock.patch.dict(sys.modules, {"desiutil": pkg, "desiutil.log": log_module})
        patcher.start()
        self.addCleanup(patcher.stop)
        env = mock.patch.dict(os.environ, {"SPEXD_DESI_GPU": "0",
                                           "PATH": support.path_with_spexctl()})
        env.start()
        self.addCleanup(env.stop)
        for k in ("SPEXD_SERVER", "DESI_NO_GPU"):  # restored by the patch's end
            os.environ.pop(k, None)

    def test_a_missing_input_says_why_and_the_path_is_in_desispecs_log(self):
        inp = support.inputs()
        out = tempfile.mkdtemp(dir=support.work_dir())
        missing = os.path.join(out, "no-such-preproc.fits")
        args = desispec_namespace(input=missing, psf=inp["psf"],
                                  output=os.path.join(out, "frame.fits"), nspec=25)
        with self.assertRaises(desi.DesiExtractError) as caught:
            desi.main_gpu_specter(args)
        message = str(caught.exception)
        self.assertIn("spexctl extract failed", message)
        self.assertIn(missing, message)
        self.assertRegex(message, "(?i)no such file|could not open|not found")
        self.assertIn("reproducing gpu_specter's CPU path, as desispec on this node "
                      "($SPEXD_DESI_GPU=0)", self.records)
        self.assertTrue(any("local extraction on the CPU backend" in r for r in self.records),
                        self.records)
        self.assertFalse(os.path.exists(os.path.join(out, "frame.fits")))

    def test_without_desiutil_the_spexd_logger_is_used(self):
        with mock.patch.dict(sys.modules, {"desiutil": None, "desiutil.log": None}):
            self.assertIs(desi.pipeline_log(), desi.log)
        self.assertIsNot(desi.pipeline_log(), desi.log)


class CommunicatorTest(unittest.TestCase):
    """main_gpu_specter's MPI contract, with the extraction itself stubbed out."""

    def run_rank(self, comm=None, coordinator=None, fails=False):
        calls = []

        def fake_extract(args, probe=None, log=None):
            calls.append(args)
            if fails:
                raise desi.DesiExtractError("spexctl extract failed (exit status 1)")

        ns = desispec_namespace(input="i", psf="p", output="o")
        with mock.patch.object(desi, "extract", fake_extract):
            try:
                desi.main_gpu_specter(ns, comm=comm, coordinator=coordinator)
                error = None
            except desi.DesiExtractError as e:
                error = e
        self.assertFalse(hasattr(ns, "server"))  # the caller's namespace is left alone
        return calls, error

    def test_rank_zero_extracts_once(self):
        comm = FakeComm(rank=0)
        calls, error = self.run_rank(comm)
        self.assertEqual((len(calls), error, comm.sent), (1, None, [None]))
        self.assertEqual(calls[0].nspec, 500)  # desispec's default
        calls, error = self.run_rank(FakeComm(rank=1))
        self.assertEqual((calls, error), ([], None))
        calls, error = self.run_rank(None)  # no MPI: this process extracts
        self.assertEqual(len(calls), 1)

    def test_failure_raises_on_every_rank(self):
        comm = FakeComm(rank=0)
        calls, error = self.run_rank(comm, fails=True)
        self.assertIn("exit status 1", str(error))
        self.assertEqual(len(comm.sent), 1)
        calls, error = self.run_rank(FakeComm(rank=1, root_says=comm.sent[0]))
        self.assertEqual(calls, [])
        self.assertIn("rank 0 failed", str(error))
        self.assertIn("exit status 1", str(error))
        # A gpu_specter IO coordinator: its communicator is the one used.
        coordinator = argparse.Namespace(comm=FakeComm(rank=1, root_says=None), rank=1)
        self.assertEqual(self.run_rank(coordinator=coordinator), ([], None))


def _tail(text):
    return text[-3000:]


@unittest.skipUnless(os.path.isdir(dropin.REF) and os.path.exists(dropin.MAKE_INPUT),
                     f"{dropin.REF} absent: desispec's reference outputs live in the reference data beside the clone")
class NodeWithoutGpuTest(unittest.TestCase):
    """desi_extract_spectra's command line without --no-gpu, on a node without a GPU
    ($SPEXD_DESI_GPU=0 where the test node has one): desispec's CPU-path numbers."""

    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="spexd-desi-sem-", dir=support.work_dir())
        subprocess.run([sys.executable, dropin.MAKE_INPUT, "--preproc", dropin.PREPROC,
                        "--outdir", cls.out], check=True)
        cls.env = {k: v for k, v in os.environ.items()
                   if k not in dropin.DESI_ENV + ("DESI_NO_GPU", "SPEXD_SERVER")}
        cls.env["PATH"] = support.path_with_spexctl(cls.env.get("PATH", ""))

    def args(self, outdir, name="default"):
        return (["-i", f"{self.out}/preproc-desi.fits", "-p", dropin.PSF, "-s", "0", "-n",
                 "25", "-w", "5760.0,6160.0,0.8", "-o", f"{outdir}/frame-{name}.fits"]
                + [a.format(D=outdir, OUT=self.out) for a in dropin.VARIANTS[name]])

    def run_desi(self, outdir, gpu, *extra, name="default"):
        env = dict(self.env, SPEXD_DESI_GPU=gpu)
        r = subprocess.run([sys.executable, "-m", "spexd.desi", *self.args(outdir, name),
                            *extra], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, _tail(r.stderr))
        return r.stderr

    def test_same_command_line_same_chi2pix_and_mask(self):
        server = support.Server()
        for name, extra in (("default", []), ("regularize", []),
                            ("default", ["--server", server.target])):
            with self.subTest(variant=name, server=bool(extra)):
                outdir = tempfile.mkdtemp(dir=self.out)
                log = self.run_desi(outdir, "0", *extra, name=name)
                self.assertIn("reproducing gpu_specter's CPU path, as desispec on this node "
                              "($SPEXD_DESI_GPU=0)", log)
                self.assertIn("extracting on spexd server" if extra else "CPU backend", log)
                problems = dropin.compare_files(
                    os.path.join(dropin.REF, f"frame-{name}.fits.gz"),
                    os.path.join(outdir, f"frame-{name}.fits"), tol=1e-6)
                self.assertEqual(problems, [], "\n".join(problems))

    def test_spexctl_extract_decides_as_desispec(self):
        # The README offers `spexctl extract ARGS` as desi_extract_spectra's swap: the same
        # command line (no --no-gpu) on a node without a GPU gives desispec's CPU-path
        # CHI2PIX and MASK, locally and through a server; with a GPU the GPU path.
        server = support.Server()
        spexctl = support.exe("spexctl")
        for extra in ([], ["--server", server.target]):
            with self.subTest(server=bool(extra)):
                outdir = tempfile.mkdtemp(dir=self.out)
                r = subprocess.run([spexctl, "extract", *extra, *self.args(outdir)],
                                   env=dict(self.env, SPEXD_DESI_GPU="0"), capture_output=True,
                                   text=True)
                self.assertEqual(r.returncode, 0, _tail(r.stderr))
                self.assertIn("reproducing gpu_specter's CPU path, as desispec on this node "
                              "($SPEXD_DESI_GPU=0)", r.stderr)
                problems = dropin.compare_files(
                    os.path.join(dropin.REF, "frame-default.fits.gz"),
                    os.path.join(outdir, "frame-default.fits"), tol=1e-6)
                self.assertEqual(problems, [], "\n".join(problems))
        # This node by its own probe (the CUDA driver): the path follows what it found.
        outdir = tempfile.mkdtemp(dir=self.out)
        env = {k: v for k, v in self.env.items() if k != "SPEXD_DESI_GPU"}
        r = subprocess.run([spexctl, "extract", *self.args(outdir)], env=env,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, _tail(r.stderr))
        n, how = desi._driver_gpus()
        self.assertIn(f"reproducing gpu_specter's {'GPU' if n else 'CPU'} path, as desispec "
                      f"on this node ({how})", r.stderr)
        # A GPU node: the GPU path, whose CHI2PIX differs from the stored CPU-path one.
        outdir = tempfile.mkdtemp(dir=self.out)
        r = subprocess.run([spexctl, "extract", "-q", *self.args(outdir)],
                           env=dict(self.env, SPEXD_DESI_GPU="1"), capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, _tail(r.stderr))
        self.assertNotEqual(dropin.compare_files(
            os.path.join(dropin.REF, "frame-default.fits.gz"),
            os.path.join(outdir, "frame-default.fits"), tol=1e-6), [])

    def test_a_gpu_node_gets_the_gpu_path(self):
        # The rule matters: gpu_specter's GPU-path numbers differ from the stored CPU-path
        # ones in CHI2PIX; --no-gpu and $DESI_NO_GPU bring the CPU path back.
        from astropy.io import fits

        with fits.open(os.path.join(dropin.REF, "frame-default.fits.gz")) as f:
            ref = f["CHI2PIX"].data.astype(np.float64)
        outdir = tempfile.mkdtemp(dir=self.out)
        log = self.run_desi(outdir, "1")
        self.assertIn("reproducing gpu_specter's GPU path", log)
        with fits.open(f"{outdir}/frame-default.fits") as f:
            got = f["CHI2PIX"].data.astype(np.float64)
        differs = np.mean(np.abs(got - ref) > 1e-6 * np.abs(ref).max())
        self.assertGreater(differs, 0.5)
        for extra, env in ((["--no-gpu"], {}), ([], {"DESI_NO_GPU": "1"})):
            with self.subTest(extra=extra, env=env):
                outdir = tempfile.mkdtemp(dir=self.out)
                r = subprocess.run([sys.executable, "-m", "spexd.desi", *self.args(outdir),
                                    *extra], env=dict(self.env, SPEXD_DESI_GPU="1", **env),
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, _tail(r.stderr))
                self.assertIn("reproducing gpu_specter's CPU path", r.stderr)
                self.assertEqual(dropin.compare_files(
                    os.path.join(dropin.REF, "frame-default.fits.gz"),
                    f"{outdir}/frame-default.fits", tol=1e-6), [])

    def test_this_node_by_its_own_probe(self):
        # No override: the log names what the probe found, and the path follows it.
        env = {k: v for k, v in self.env.items() if k != "SPEXD_DESI_GPU"}
        outdir = tempfile.mkdtemp(dir=self.out)
        r = subprocess.run([sys.executable, "-m", "spexd.desi", *self.args(outdir)], env=env,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, _tail(r.stderr))
        usable, how = desi.gpu_probe()
        self.assertIn(f"reproducing gpu_specter's {'GPU' if usable else 'CPU'} path, as "
                      f"desispec on this node ({how})", r.stderr)
        if not usable:
            self.assertEqual(dropin.compare_files(
                os.path.join(dropin.REF, "frame-default.fits.gz"),
                f"{outdir}/frame-default.fits", tol=1e-6), [])

    def test_main_gpu_specter_in_process(self):
        # As desi_proc calls it: desispec's namespace, a communicator; rank 0 writes the file.
        outdir = tempfile.mkdtemp(dir=self.out)
        ns = desispec_namespace(input=f"{self.out}/preproc-desi.fits", psf=dropin.PSF,
                                output=f"{outdir}/frame-default.fits", nspec=25,
                                wavelength="5760.0,6160.0,0.8")
        comm = FakeComm(rank=0)
        timing = {}
        saved = dict(os.environ)
        try:
            for k in dropin.DESI_ENV + ("SPEXD_SERVER",):
                os.environ.pop(k, None)
            os.environ.update(PATH=support.path_with_spexctl(), SPEXD_DESI_GPU="0")
            desi.main_gpu_specter(ns, comm=comm, timing=timing)
            self.assertEqual(comm.sent, [None])
            self.assertLessEqual(timing["frame-start"], timing["frame-write"])
            self.assertEqual(dropin.compare_files(
                os.path.join(dropin.REF, "frame-default.fits.gz"),
                f"{outdir}/frame-default.fits", tol=1e-6), [])
            # A failure (the PSF missing) raises on rank 0 and is broadcast.
            comm = FakeComm(rank=0)
            bad = desispec_namespace(input=ns.input, psf=f"{outdir}/none.fits",
                                     output=f"{outdir}/bad.fits", nspec=25)
            with self.assertRaisesRegex(desi.DesiExtractError, "spexctl extract failed"):
                desi.main_gpu_specter(bad, comm=comm)
            self.assertIn("spexctl extract failed", comm.sent[0])
            self.assertIn(f"{outdir}/none.fits", comm.sent[0])  # the reason, not only stderr
            self.assertFalse(os.path.exists(f"{outdir}/bad.fits"))
        finally:
            os.environ.clear()
            os.environ.update(saved)


# 120-character header values (one with a quote), a 141-character one: CONTINUE cards.
LONG120 = ("DETAIL " + "0123456789" * 12)[:60] + "'" + ("abcdefghij" * 6)[:59]
LONG141 = ("/global/cfs/cdirs/desi/spectro/redux/" + "x" * 104)[:141]


class LongStringsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from astropy.io import fits

        inp = support.inputs()
        cls.psf = inp["psf"]
        # The input under a path over 68 characters (outside $SPECPROD: kept as given).
        cls.dir = os.path.join(support.work_dir(), "long-strings-" + "d" * 60)
        os.makedirs(cls.dir, exist_ok=True)
        cls.preproc = os.path.join(cls.dir, "preproc-r0-00012345.fits")
        with fits.open(inp["preproc"]) as f:
            h = f[0].header
            h["LONGSTRN"] = ("OGIP 1.0", "The OGIP long string convention may be used.")
            h["DETAIL"] = (LONG120, "a 120-character value")
            h["LONGKEY"] = LONG141
            h["CAMERA"] = "r0"
            h["FLAVOR"] = "science"
            f.writeto(cls.preproc)
        with open(cls.preproc, "rb") as f:
            header = f.read(2880 * 4)
        assert b"CONTINUE  '" in header, "the input must hold CONTINUE cards"
        assert len(cls.preproc) > 68
        cls.server = support.Server()
        cls.env = {k: v for k, v in os.environ.items() if k not in ("SPEXD_SERVER",)
                   and k not in dropin.DESI_ENV}
        cls.env.update(PATH=support.path_with_spexctl(cls.env.get("PATH", "")), SPEXD_DESI_GPU="0")

    def check(self, path, how):
        from astropy.io import fits

        with fits.open(path) as f:
            f.verify("exception")
            h = f["FLUX"].header
            for key, want in (("DETAIL", LONG120), ("LONGKEY", LONG141),
                              ("IN_IMG", self.preproc), ("IN_PSF", self.psf),
                              ("LONGSTRN", "OGIP 1.0")):
                self.assertEqual(h.get(key), want, f"{how}: {key}")
            self.assertEqual(h.comments["DETAIL"], "a 120-character value", how)

    def common(self, out):
        return ["-i", self.preproc, "-p", self.psf, "-o", out, "-s", "0", "-n", "25",
                "-w", ",".join(str(v) for v in support.WAVELENGTH)]

    def test_every_path(self):
        import spexd

        d = tempfile.mkdtemp(dir=support.work_dir())
        spexctl = support.exe("spexctl")
        runs = {
            "spexctl --local": [spexctl, "extract", "--local", "-q",
                                *self.common(f"{d}/local.fits")],
            "spexctl --server": [spexctl, "extract", "-q", "--server", self.server.target,
                                 *self.common(f"{d}/remote.fits")],
            "spexd-desi-extract": [sys.executable, "-m", "spexd.desi",
                                   *self.common(f"{d}/desi-local.fits")],
            "spexd-desi-extract --server": [sys.executable, "-m", "spexd.desi", "--server",
                                            self.server.target,
                                            *self.common(f"{d}/desi-server.fits")],
        }
        outputs = {"spexctl --local": "local", "spexctl --server": "remote",
                   "spexd-desi-extract": "desi-local",
                   "spexd-desi-extract --server": "desi-server"}
        for how, cmd in runs.items():
            with self.subTest(path=how):
                r = subprocess.run(cmd, env=self.env, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, _tail(r.stderr))
                self.check(f"{d}/{outputs[how]}.fits", how)
        with self.subTest(path="server-written"):
            server_out = os.path.join(support.work_dir(), "server-written.fits")
            cmd = [spexctl, "extract", "-q", "--server", self.server.target,
                   *self.common(f"{d}/unused.fits")]
            cmd = cmd[:cmd.index("-o")] + cmd[cmd.index("-o") + 2:]
            subprocess.run(cmd + ["--server-output-path", server_out], check=True,
                           env=self.env)
            self.check(server_out, "server-written")
        with self.subTest(path="Python client write()"):
            with spexd.Client(self.server.target) as client:
                result = client.extract(image=self.preproc, psf=self.psf, specmin=0, nspec=25,
                                        wavelength=support.WAVELENGTH)
                result.write(f"{d}/python.fits")
            self.check(f"{d}/python.fits", "Python write()")


if __name__ == "__main__":
    unittest.main()
