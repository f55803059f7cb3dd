"""desi_extract_spectra on spexd: the same command line, the same frame file.

    spexd-desi-extract -i preproc.fits -p psf.fits -o frame.fits [desi_extract_spectra
        options] [--server HOST:PORT]

For pipeline code, ``spexd.desi.main(["-i", ...])`` (or ``main(parse([...]))``) does the
same. The job runs on the spexd server named by ``--server`` or ``$SPEXD_SERVER`` (the
input and PSF files are uploaded); with none, or when it cannot be reached, it runs
locally with ``spexctl extract --local`` and says so in the log.
"""
import argparse
import logging
import os
import shutil
import subprocess
import sys

log = logging.getLogger("spexd.desi")


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
    p.add_argument("--mpi", action="store_true", help="accepted; spexd parallelises itself")
    p.add_argument("--decorrelate-fibers", action="store_true", help="not supported: refused")
    p.add_argument("--no-scores", action="store_true", help="Do not compute scores")
    p.add_argument("--psferr", type=float, help="fractional PSF model error (default: PSF file)")
    p.add_argument("--barycentric-correction", action="store_true",
                   help="apply barycentric correction to wavelength")
    p.add_argument("--use-specter", action="store_true", help="accepted: CPU extraction")
    p.add_argument("--no-gpu", action="store_true", help="accepted: CPU extraction (local)")
    p.add_argument("--pixpad-frac", type=float, default=0.8,
                   help="fraction of a PSF spotsize to pad in pixels when extracting")
    p.add_argument("--wavepad-frac", type=float, default=0.2,
                   help="fraction of a PSF spotsize to pad in wavelengths when extracting")
    p.add_argument("--server", default=os.environ.get("SPEXD_SERVER"),
                   help="spexd server (default $SPEXD_SERVER); none: local extraction")
    return p


def parse(options=None):
    return parser().parse_args(options)


def spexctl_args(args):
    """The `spexctl extract` command line of the same job (same option names)."""
    out = ["-i", args.input, "-p", args.psf, "-o", args.output, "-s", str(args.specmin),
           "-r", repr(args.regularize), "--bundlesize", str(args.bundlesize),
           "--nsubbundles", str(args.nsubbundles), "--nwavestep", str(args.nwavestep),
           "--pixpad-frac", repr(args.pixpad_frac), "--wavepad-frac", repr(args.wavepad_frac)]
    for flag, value in (("-f", args.fibermap), ("-m", args.model), ("-w", args.wavelength),
                        ("-n", args.nspec), ("--psferr", args.psferr)):
        if value is not None:
            out += [flag, str(value)]
    for flag, on in (("--no-scores", args.no_scores),
                     ("--barycentric-correction", args.barycentric_correction),
                     ("--no-gpu", args.no_gpu), ("--use-specter", args.use_specter),
                     ("-v", args.verbose)):
        if on:
            out.append(flag)
    return out


def _spexctl():
    for candidate in (os.environ.get("SPEXD_SPEXCTL"), shutil.which("spexctl"),
                      os.path.join(sys.prefix, "bin", "spexctl")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("spexctl not found (set $SPEXD_SPEXCTL or put it on PATH) for a "
                            "local extraction")


def _reachable(server):
    from spexd.client import Client
    from spexd.errors import SpexdError

    try:
        with Client(server, retries=1, deadline=10) as client:
            client.server_info()
        return True, ""
    except (SpexdError, ValueError) as e:
        return False, str(e)


def _remote(args):
    from spexd.client import Client

    params = dict(specmin=args.specmin, bundlesize=args.bundlesize,
                  nsubbundles=args.nsubbundles, nwavestep=args.nwavestep,
                  regularize=args.regularize, pixpad_frac=args.pixpad_frac,
                  wavepad_frac=args.wavepad_frac, psferr=args.psferr,
                  barycentric_correction=args.barycentric_correction,
                  no_scores=args.no_scores, want_model=args.model is not None,
                  # desispec --no-gpu runs gpu_specter's CPU path: the same numbers here.
                  reproduce="gpu_specter_cpu" if (args.no_gpu or args.use_specter) else None)
    if args.nspec is not None:
        params["nspec"] = args.nspec
    if args.wavelength is not None:
        params["wavelength"] = tuple(float(v) for v in args.wavelength.split(","))
    if args.fibermap is not None:
        params["fibermap_path"] = args.fibermap
    # Only a file is written: float32 arrays on the wire give the same file (issue 22).
    with Client(args.server) as client:
        result = client.extract(image=args.input, psf=args.psf, wire_precision="float32",
                                **params)
    result.write(args.output, model_path=args.model)
    return 0


def _remote_reporting_errors(args):
    """_remote, with a refusal (an ordinary answer such as INVALID_ARGUMENT) or an
    unreadable input file reported as one line on stderr and exit status 1, as desispec's
    own errors end the command: not a traceback."""
    from spexd.errors import SpexdError

    try:
        return _remote(args)
    except (SpexdError, OSError, ValueError) as e:
        text = " ".join(str(e).split("\n"))
        print(f"spexd-desi-extract: error: {text}", file=sys.stderr)
        return 1


def main(args=None):
    """Runs one extraction; `args` is an argv list (default sys.argv[1:]) or parse()'s
    namespace. Returns the exit status."""
    if args is None or isinstance(args, (list, tuple)):
        args = parse(args)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s:%(name)s: %(message)s")
    if args.decorrelate_fibers:
        log.error("--decorrelate-fibers is not supported by spexd")
        return 2
    if args.mpi:
        log.info("--mpi ignored: spexd parallelises the extraction itself")
    if args.server:
        ok, why = _reachable(args.server)
        if ok:
            log.info("extracting on spexd server %s", args.server)
            return _remote_reporting_errors(args)
        log.warning("spexd server %s not reachable (%s); extracting locally", args.server, why)
    else:
        log.info("no spexd server given (--server, $SPEXD_SERVER); extracting locally")
    cmd = [_spexctl(), "extract", "--local", "-q"] + spexctl_args(args)
    log.debug("running %s", " ".join(cmd))
    return subprocess.run(cmd, check=False).returncode


def console_main():
    sys.exit(main())


if __name__ == "__main__":
    console_main()
