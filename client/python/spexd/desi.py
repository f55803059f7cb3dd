"""desi_extract_spectra on spexd: the same command line, the same frame file.

    spexd-desi-extract -i preproc.fits -p psf.fits -o frame.fits [desi_extract_spectra
        options] [--server HOST:PORT]

For pipeline code, ``spexd.desi.main(["-i", ...])`` (or ``main(parse([...]))``) does the
same, and ``spexd.desi.main_gpu_specter(args, comm=None, timing=None, coordinator=None)``
is desispec.scripts.extract.main_gpu_specter (what desi_proc calls): it takes the namespace
of desispec.scripts.extract.parse unchanged, extracts once per MPI communicator (on its
rank 0) and raises on failure. The job runs on the spexd server named by ``--server`` or
``$SPEXD_SERVER`` (the input and PSF files are uploaded); with none, or when it cannot be
reached, it runs locally with ``spexctl extract --local`` and says so in the log.

Which of gpu_specter's two paths the numbers reproduce follows desispec's rule for this
node (desispec.scripts.extract.main_gpu_specter: ``use_gpu = is_gpu_available() and not
args.no_gpu``), whatever does the work: gpu_specter's CPU path with ``--no-gpu``, with
``$DESI_NO_GPU`` set, or without a usable GPU; its GPU path otherwise (gpu_semantics()).
"""
import argparse
import ctypes
import logging
import os
import shutil
import subprocess
import sys
import time

log = logging.getLogger("spexd.desi")


def pipeline_log():
    """The log of desispec's own code where desiutil imports (desiutil.log.get_logger(),
    which desispec's scripts log through): called in desi_proc's process, the extraction's
    lines (which gpu_specter path, where it ran) go where desispec's go. `log` otherwise."""
    try:
        from desiutil.log import get_logger
    except ImportError:
        return log
    return get_logger()

# Classic specter (desi_extract_spectra --use-specter, desispec's main_mpi) is a different
# extraction from gpu_specter's, which is the one spexd reproduces.
USE_SPECTER_REFUSED = (
    "--use-specter (classic specter's extraction) is not reproduced by spexd: specter "
    "extracts differently from gpu_specter (its own patch and wavelength padding, "
    "regularisation and chi2pix/mask rules; FLUX differs from gpu_specter's by up to "
    "0.115 sigma on DESI data), and spexd reproduces gpu_specter only. Drop --use-specter "
    "for gpu_specter's semantics (desi_extract_spectra's default)")


class DesiExtractError(RuntimeError):
    """An extraction that could not run or failed; the message says why."""


def parser():
    """desi_extract_spectra's options (desispec.scripts.extract.parse), plus --server."""
    p = argparse.ArgumentParser(prog="spexd-desi-extract",
                                description="Extract spectra from pre-processed raw data "
                                            "(desi_extract_spectra on spexd).")
    p.add_argument("-i", "--input", required=True, help="input image")
    p.add_argument("-f", "--fibermap", help="input fibermap file")
    p.add_argument("-p", "--psf", required=True, help="input psf file")
    p.add_argument("-o", "--output", required=True, help="output extracted spectra file")
    p.add_argument("-m", "--model", help="output 2D pixel model file")
    p.add_argument("-w", "--wavelength", help="wavemin,wavemax,dw")
    p.add_argument("-s", "--specmin", type=int, default=0, help="first spectrum to extract")
    p.add_argument("-n", "--nspec", type=int, help="number of spectra to extract (default 500)")
    p.add_argument("-r", "--regularize", type=float, default=0.0,
                   help="regularization amount (default %(default)s)")
    p.add_argument("--bundlesize", type=int, default=25, help="number of spectra per bundle")
    p.add_argument("--nsubbundles", type=int, default=5, help="number of extraction sub-bundles")
    p.add_argument("--nwavestep", type=int, default=50,
                   help="number of wavelength steps per divide-and-conquer extraction step")
    p.add_argument("-v", "--verbose", action="store_true", help="print more stuff")
    p.add_argument("--mpi", action="store_true",
                   help="MPI: only rank 0 of COMM_WORLD extracts (spexd parallelises itself)")
    p.add_argument("--decorrelate-fibers", action="store_true", help="not supported: refused")
    p.add_argument("--no-scores", action="store_true", help="Do not compute scores")
    p.add_argument("--psferr", type=float, help="fractional PSF model error (default: PSF file)")
    p.add_argument("--barycentric-correction", action="store_true",
                   help="apply barycentric correction to wavelength")
    p.add_argument("--use-specter", action="store_true",
                   help="classic specter: refused (spexd reproduces gpu_specter only)")
    p.add_argument("--no-gpu", action="store_true",
                   help="gpu_specter's CPU-path results on the CPU, as desispec (also "
                        "$DESI_NO_GPU, or no usable GPU)")
    p.add_argument("--pixpad-frac", type=float, default=0.8,
                   help="fraction of a PSF spotsize to pad in pixels when extracting")
    p.add_argument("--wavepad-frac", type=float, default=0.2,
                   help="fraction of a PSF spotsize to pad in wavelengths when extracting")
    p.add_argument("--server", default=os.environ.get("SPEXD_SERVER"),
                   help="spexd server (default $SPEXD_SERVER); none: local extraction")
    return p


def parse(options=None):
    return parser().parse_args(options)


def _adopt(args):
    """A copy of `args` (ours or desispec.scripts.extract.parse's: it lacks --server) with
    every option of parser() present; the caller's namespace is left as it was."""
    out = parser().parse_args(["-i", "-", "-p", "-", "-o", "-"])
    for key, value in vars(args).items():
        setattr(out, key, value)
    if getattr(args, "server", None) is None:
        out.server = os.environ.get("SPEXD_SERVER")
    return out


# -- desispec's GPU rule ------------------------------------------------------------------

def usable_device_nodes(dev="/dev"):
    """The NVIDIA kernel driver's GPU device nodes (nvidia0, nvidia1 ...) in `dev` this
    process may open for reading and writing; 0 unless nvidiactl is usable too."""
    if not os.access(os.path.join(dev, "nvidiactl"), os.R_OK | os.W_OK):
        return 0
    try:
        names = os.listdir(dev)
    except OSError:
        return 0
    return sum(1 for n in names if n.startswith("nvidia") and n[6:].isdigit()
               and os.access(os.path.join(dev, n), os.R_OK | os.W_OK))


def _driver_gpus():
    """Devices the CUDA driver sees (0 without a driver or device), and how that was found.

    Initialising the driver (cuInit) costs a GPU node ~0.45 s a process (two H200s): where
    no $CUDA_VISIBLE_DEVICES narrows the devices, the kernel driver's device nodes and the
    driver library answer without it; with no usable node, or under $CUDA_VISIBLE_DEVICES,
    the driver is asked."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0, "no CUDA driver (libcuda.so.1)"
    nodes = 0 if "CUDA_VISIBLE_DEVICES" in os.environ else usable_device_nodes()
    if nodes > 0:
        return nodes, f"the NVIDIA driver's device nodes show {nodes} device(s)"
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0, "the CUDA driver reports no usable device"
    return count.value, f"the CUDA driver sees {count.value} device(s)"


def gpu_probe():
    """(usable, how): whether desispec would extract on a GPU here, before --no-gpu and
    $DESI_NO_GPU are looked at.

    - $SPEXD_DESI_GPU=1/0 says so (tests, or a node that knows better);
    - where desispec imports (desi_proc's process, a desispec environment), its own
      desispec.gpu (cupy and numba.cuda both import and see a GPU; desispec.gpu.NoGPU);
    - else where cupy and numba import, the same test desispec.gpu makes;
    - else the CUDA driver's device count (a GPU node whose desispec would have them).
    """
    forced = os.environ.get("SPEXD_DESI_GPU")
    if forced is not None:
        if forced not in ("0", "1"):
            raise DesiExtractError(f"$SPEXD_DESI_GPU must be 0 or 1 (got {forced!r})")
        return forced == "1", f"$SPEXD_DESI_GPU={forced}"
    try:
        import desispec.gpu as dgpu
    except ImportError:
        dgpu = None
    if dgpu is not None:
        usable = bool(dgpu._cupy_available and dgpu._numba_cuda_available
                      and dgpu._context_use_gpu)
        return usable, ("desispec.gpu: cupy and numba.cuda see a GPU" if usable else
                        "desispec.gpu: no GPU usable by cupy and numba.cuda")
    try:
        import cupy
        import numba.cuda
    except ImportError:
        n, how = _driver_gpus()
        return n > 0, how
    usable = bool(cupy.is_available() and numba.cuda.is_available())
    return usable, ("cupy and numba.cuda see a GPU" if usable else
                    "cupy and numba.cuda see no GPU")


def gpu_semantics(args, probe=gpu_probe):
    """("gpu_specter_gpu" or "gpu_specter_cpu", why): desispec's rule
    (`use_gpu = is_gpu_available() and not args.no_gpu`, is_gpu_available() false when
    $DESI_NO_GPU is set). `probe` is gpu_probe or a test's stand-in."""
    if getattr(args, "no_gpu", False):
        return "gpu_specter_cpu", "--no-gpu"
    if "DESI_NO_GPU" in os.environ:
        return "gpu_specter_cpu", "$DESI_NO_GPU is set"
    usable, how = probe()
    return ("gpu_specter_gpu" if usable else "gpu_specter_cpu"), how


def _check_options(args):
    """desispec's gpu_specter_check_input_options (nspec defaults to 500): ValueError."""
    if args.bundlesize % args.nsubbundles != 0:
        raise ValueError(f"bundlesize ({args.bundlesize}) must be evenly divisible by "
                         f"nsubbundles ({args.nsubbundles})")
    if args.nspec is None:
        args.nspec = 500
    if args.nspec % args.bundlesize != 0:
        raise ValueError(f"nspec ({args.nspec}) must be evenly divisible by bundlesize "
                         f"({args.bundlesize})")
    if args.specmin % args.bundlesize != 0:
        raise ValueError(f"specmin ({args.specmin}) must begin at a bundle boundary")
    if args.decorrelate_fibers:
        raise ValueError("--decorrelate-fibers not implemented with gpu_specter")


def spexctl_args(args, reproduce, backend="cpu"):
    """The `spexctl extract` command line of the same job (same option names); which
    gpu_specter path to reproduce and the backend are decided here, not by spexctl."""
    out = ["-i", args.input, "-p", args.psf, "-o", args.output, "-s", str(args.specmin),
           "-r", repr(args.regularize), "--bundlesize", str(args.bundlesize),
           "--nsubbundles", str(args.nsubbundles), "--nwavestep", str(args.nwavestep),
           "--pixpad-frac", repr(args.pixpad_frac), "--wavepad-frac", repr(args.wavepad_frac),
           "--reproduce", reproduce, "--backend", backend]
    for flag, value in (("-f", args.fibermap), ("-m", args.model), ("-w", args.wavelength),
                        ("-n", args.nspec), ("--psferr", args.psferr)):
        if value is not None:
            out += [flag, str(value)]
    for flag, on in (("--no-scores", args.no_scores),
                     ("--barycentric-correction", args.barycentric_correction),
                     ("-v", args.verbose)):
        if on:
            out.append(flag)
    return out


def spexctl_candidates():
    """Where local mode looks for spexctl, in order: the package's own bin/ (a package that
    ships it), PATH, this Python's prefix and /usr/local/bin (where `cmake --install` puts
    it by default)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [c for c in (os.path.join(here, "bin", "spexctl"), shutil.which("spexctl"),
                        os.path.join(sys.prefix, "bin", "spexctl"),
                        "/usr/local/bin/spexctl") if c]


def find_spexctl():
    for candidate in spexctl_candidates():
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise DesiExtractError(
        "spexctl, which a local extraction runs, was not found (looked at "
        + ", ".join(spexctl_candidates()) + "). Install spexd's command-line tools "
        "(cmake --install puts spexctl in PREFIX/bin) and put them on PATH, or extract on a "
        "server (--server HOST:PORT or "
        "$SPEXD_SERVER)")


def local_backend(args, spexctl):
    """("cuda" or "cpu", why): the GPU where the CUDA driver sees one and spexctl's CUDA
    module (libspexd_cuda.so) is where spexctl loads it from, unless --no-gpu or
    $DESI_NO_GPU ask for none. The results follow gpu_semantics() either way."""
    if getattr(args, "no_gpu", False) or "DESI_NO_GPU" in os.environ:
        return "cpu", "--no-gpu" if getattr(args, "no_gpu", False) else "$DESI_NO_GPU is set"
    n, how = _driver_gpus()
    if n == 0:
        return "cpu", how
    exe_dir = os.path.dirname(os.path.realpath(spexctl))
    # spexctl loads $SPEXD_CUDA_MODULE alone when it is set, else the first of the others.
    named = os.environ.get("SPEXD_CUDA_MODULE")
    modules = [named] if named else [
        os.path.join(exe_dir, "libspexd_cuda.so"),
        os.path.join(exe_dir, "lib", "libspexd_cuda.so"),
        os.path.join(os.path.dirname(exe_dir), "lib", "spexd", "libspexd_cuda.so")]
    if any(m and os.path.isfile(m) for m in modules):
        return "cuda", how
    return "cpu", f"{how}, but spexctl has no CUDA module (libspexd_cuda.so) beside it"


def _reachable(server):
    from spexd.client import Client
    from spexd.errors import SpexdError

    try:
        with Client(server, retries=1, deadline=10) as client:
            client.server_info()
        return True, ""
    except (SpexdError, ValueError) as e:
        return False, str(e)


def _remote(args, reproduce):
    from spexd.client import Client

    params = dict(specmin=args.specmin, bundlesize=args.bundlesize,
                  nsubbundles=args.nsubbundles, nwavestep=args.nwavestep,
                  regularize=args.regularize, pixpad_frac=args.pixpad_frac,
                  wavepad_frac=args.wavepad_frac, psferr=args.psferr,
                  barycentric_correction=args.barycentric_correction,
                  no_scores=args.no_scores, want_model=args.model is not None,
                  reproduce=reproduce)
    if args.nspec is not None:
        params["nspec"] = args.nspec
    if args.wavelength is not None:
        params["wavelength"] = tuple(float(v) for v in args.wavelength.split(","))
    if args.fibermap is not None:
        params["fibermap_path"] = args.fibermap
    # Only a file is written: float32 arrays on the wire give the same file.
    with Client(args.server) as client:
        result = client.extract(image=args.input, psf=args.psf, wire_precision="float32",
                                **params)
    result.write(args.output, model_path=args.model)


def _spexctl_failed(rc, stderr):
    """The error of a failed local run: its exit status and the reason spexctl gave (its
    last lines), so that a caller in-process (desi_proc) sees why, not only stderr."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    reason = " / ".join(lines[-3:])[-2000:] or "no message"
    return DesiExtractError(f"spexctl extract failed (exit status {rc}): {reason}")


def extract(args, probe=gpu_probe, log=log):
    """One extraction of parser()'s namespace; raises DesiExtractError (or desispec's
    ValueError for inconsistent bundle options) on failure, its message saying why. `log`
    gets the lines saying which gpu_specter path and where the work ran."""
    from spexd.errors import SpexdError

    if args.use_specter:
        raise DesiExtractError(USE_SPECTER_REFUSED)
    _check_options(args)
    reproduce, why = gpu_semantics(args, probe)
    log.info("reproducing gpu_specter's %s path, as desispec on this node (%s)",
             "GPU" if reproduce == "gpu_specter_gpu" else "CPU", why)
    if args.server:
        ok, why_not = _reachable(args.server)
        if ok:
            log.info("extracting on spexd server %s", args.server)
            try:
                _remote(args, reproduce)
            except (SpexdError, OSError) as e:
                raise DesiExtractError(f"extraction on spexd server {args.server} failed: "
                                       f"{e}") from e
            return
        log.warning("spexd server %s not reachable (%s); extracting locally", args.server,
                    why_not)
    else:
        log.info("no spexd server given (--server, $SPEXD_SERVER); extracting locally")
    spexctl = find_spexctl()
    backend, why = local_backend(args, spexctl)
    log.info("local extraction on the %s backend (%s)", backend.upper(), why)
    cmd = [spexctl, "extract", "--local", "-q"] + spexctl_args(args, reproduce, backend)
    log.debug("running %s", " ".join(cmd))
    run = subprocess.run(cmd, check=False, stderr=subprocess.PIPE, text=True,
                         errors="replace")
    sys.stderr.write(run.stderr)  # as spexctl wrote it, for a command-line user
    if run.returncode != 0:
        raise _spexctl_failed(run.returncode, run.stderr)


def _logging(verbose):
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(levelname)s:%(name)s: %(message)s")


def main(args=None):
    """Runs one extraction; `args` is an argv list (default sys.argv[1:]), parse()'s or
    desispec.scripts.extract.parse()'s namespace. Returns the exit status (0, 1: the
    extraction failed, 2: options refused); the reason is logged."""
    args = parse(args) if args is None or isinstance(args, (list, tuple)) else _adopt(args)
    _logging(args.verbose)
    if args.use_specter:  # desispec's main() runs main_mpi (classic specter) for it
        log.error("%s", USE_SPECTER_REFUSED)
        return 2
    try:
        _main_gpu_specter(args, log=log)
    except ValueError as e:
        _report(e)
        return 2
    except DesiExtractError as e:
        _report(e)
        return 1
    return 0


def _report(error):
    """A failed extraction as one line on stderr, as desispec's own errors end the command
    (a refusal by the server is an ordinary answer, not a traceback)."""
    text = " ".join(str(error).split())
    print(f"spexd-desi-extract: error: {text}", file=sys.stderr)


def _communicator(args, comm, coordinator, log=log):
    """The MPI communicator desispec's main_gpu_specter would use (None: no MPI)."""
    if coordinator is not None:
        return getattr(coordinator, "comm", None)
    if comm is None and getattr(args, "mpi", False):
        try:
            from mpi4py import MPI
        except ImportError:
            log.warning("--mpi without mpi4py: extracting in this process alone")
            return None
        return MPI.COMM_WORLD
    return comm


def main_gpu_specter(args, comm=None, timing=None, coordinator=None):
    """desispec.scripts.extract.main_gpu_specter on spexd (what desi_proc calls): `args`
    is desispec.scripts.extract.parse()'s namespace (or parse()'s), taken unchanged; `comm`
    an MPI communicator (or coordinator, a gpu_specter IO coordinator, whose .comm is
    used). Rank 0 of the communicator runs the one extraction (spexd parallelises it
    itself); every rank returns once it is done and raises DesiExtractError if it failed
    (ValueError for bundle options desispec refuses, before any work). `timing`, a dict,
    gets frame-start and frame-write (time.time()), as desispec's. The log lines go to
    desispec's log (pipeline_log())."""
    _main_gpu_specter(args, comm, timing, coordinator, pipeline_log())


def _main_gpu_specter(args, comm=None, timing=None, coordinator=None, log=log):
    a = _adopt(args)
    time_start = time.time()
    _check_options(a)
    if a.use_specter:
        # desispec's main_gpu_specter ignores use_specter (main() dispatches on it): so do
        # we here; main() refuses it.
        a.use_specter = False
    comm = _communicator(a, comm, coordinator, log)
    rank = 0 if comm is None else comm.rank
    error = None
    if rank == 0:
        try:
            extract(a, log=log)
        except (DesiExtractError, ValueError) as e:
            error = e
        except Exception as e:  # noqa: BLE001 - passed on to the other ranks, then raised
            if comm is None:
                raise
            error = e
    if comm is not None:
        message = comm.bcast(None if error is None else f"{type(error).__name__}: {error}",
                             root=0)
        if error is None and message is not None:
            error = DesiExtractError(f"rank 0 failed: {message}")
    if error is not None:
        raise error
    if isinstance(timing, dict):
        timing["frame-start"] = time_start
        timing["frame-write"] = time.time()


def main_mpi(args, comm=None, timing=None):
    """desispec.scripts.extract.main_mpi, classic specter's extraction (desi_proc
    --use-specter): not reproduced; raises DesiExtractError saying what differs."""
    raise DesiExtractError(USE_SPECTER_REFUSED)


def console_main():
    """spexd-desi-extract: the exit status of main(); errors as one line, no traceback."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
