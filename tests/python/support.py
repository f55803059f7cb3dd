"""Shared fixtures of the Python client tests: real spexd servers (CPU backend) on
loopback, a simulated preproc frame and its `spexctl extract --local` reference.

Environment (set by tests/python/CMakeLists.txt): SPEXD_BIN_DIR (spexd, spexctl,
spexd-sim), SPEXD_TEST_DATA_DIR (the bundled PSF), PYTHONPATH (the built package).
"""
import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request

BIN = os.environ.get("SPEXD_BIN_DIR", "")
DATA = os.environ.get("SPEXD_TEST_DATA_DIR", "")
WAVELENGTH = (5760.0, 6160.0, 0.8)  # 501 bins: a short grid keeps the CPU runs quick
NSPEC = 50                          # two bundles of 25

_work = None
_servers = []


def _have(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# spexd.qa draws its page with matplotlib, an optional extra of the package.
needs_matplotlib = unittest.skipUnless(
    _have("matplotlib"), "matplotlib is not importable: spexd.qa draws no page without it "
    "(scripts/install-deps.sh --demo installs python3-matplotlib)")


def work_dir():
    global _work
    if _work is None:
        _work = tempfile.mkdtemp(prefix="spexd-pytest-")
        atexit.register(shutil.rmtree, _work, True)
    return _work


def exe(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} missing: build spexd, spexctl and spexd-sim first")
    return path


def path_with_spexctl(path=None):
    """PATH with the built spexctl's directory first: where local mode finds it."""
    return os.path.dirname(exe("spexctl")) + os.pathsep + (
        os.environ.get("PATH", "") if path is None else path)


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Server:
    """A spexd process on free loopback ports; stopped with SIGTERM at exit."""

    def __init__(self, *flags):
        self.log_path = os.path.join(work_dir(), f"spexd-{len(_servers)}.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [exe("spexd"), "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
             "--backend=cpu", "--cpu_threads=2", f"--data_roots={work_dir()}",
             f"--output_roots={work_dir()}",
             "--drain_seconds=5", *flags], stderr=self._log)
        _servers.append(self)
        self.port = self.metrics_port = None
        deadline = time.time() + 30
        while self.port is None and time.time() < deadline:
            if self.proc.poll() is not None:
                with open(self.log_path) as f:
                    raise RuntimeError(f"spexd exited: {f.read()}")
            with open(self.log_path) as f:
                text = f.read()
            m = re.search(r'"event":"listening".*?"port":(\d+)', text)
            if m:
                self.port = int(m.group(1))
                mp = re.search(r'"metrics_port":(\d+)', text)
                self.metrics_port = int(mp.group(1)) if mp else None
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("spexd did not start")
        self.target = f"127.0.0.1:{self.port}"

    def metric(self, name, **labels):
        """Value of one sample of /metrics (0 when absent)."""
        text = urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith(name + "{"):
                got = ",".join(sorted(line[len(name) + 1:line.index("}")].split(",")))
                if got == want:
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def log_tail(self, lines=30):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self._log.close()


def run_python(args, timeout, server=None):
    """subprocess.run(args, capture_output=True, text=True) of a Python program, except that
    one still running after `timeout` seconds is made to print every thread's Python stack
    (faulthandler, on SIGABRT) and the test fails with its stderr and the end of `server`'s
    log: a hang says where it waited."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        log = server.log_tail() if server is not None else "(no server)"
        raise AssertionError(f"{' '.join(args[:4])} ... still ran after {timeout} s. Its "
                             f"stderr, with its threads' stacks:\n{err}\nThe server's log "
                             f"ends:\n{log}") from None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _stop_all():
    for s in _servers:
        try:
            s.stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            s.proc.kill()


atexit.register(_stop_all)

_inputs = None


def inputs():
    """{psf, preproc, local, model}: the simulated frame (fibres 0-49) and the
    reference frame + model written by `spexctl extract --local`, made once."""
    global _inputs
    if _inputs is None:
        d = work_dir()
        psf = os.path.join(d, "psf.fits")
        shutil.copy(os.path.join(DATA, "psf-r0-00051060.fits"), psf)
        preproc = os.path.join(d, "preproc.fits")
        w = ",".join(str(v) for v in WAVELENGTH)
        run(exe("spexd-sim"), f"--psf={psf}", f"--out={preproc}", f"--fibers=0,{NSPEC}",
            f"--wavelength={w}", "--seed=1")
        local = os.path.join(d, "local.fits")
        model = os.path.join(d, "local-model.fits")
        # The path the Python client and the server reproduce by default (spexctl's own
        # default follows desispec's choice on the node).
        run(exe("spexctl"), "extract", "--local", "--quiet", "--reproduce", "gpu_specter_gpu",
            "-i", preproc, "-p", psf,
            "-o", local, "-m", model, "-w", w, "-s", "0", "-n", str(NSPEC))
        _inputs = {"psf": psf, "preproc": preproc, "local": local, "model": model}
    return _inputs
