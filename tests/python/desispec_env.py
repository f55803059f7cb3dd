"""Finds desispec for the tests that run desispec's own code.

desispec is neither in Debian nor reachable from CI, so it is looked for, in order, in:
1. $SPEXD_DESISPEC_PATH: a stack folder made by scripts/desispec_stack.sh (it holds
   desispec/, desiutil/, desitarget/, specter/, gpu_specter/, desimodel/ and STACK.txt), or a
   colon-separated list of `py/` folders;
2. where it is not set, ../desistack beside the clone (where scripts/desispec_stack.sh
   puts it by default, beside the reference data);
3. an installed desispec.
Where none imports, require() makes the test module exit 77 (ctest: skipped), saying how
to provide one.
"""
import os
import sys

PACKAGES = ("desispec", "desiutil", "desitarget", "specter", "gpu_specter", "desimodel")
SRC = os.environ.get("SPEXD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
HOW = ("scripts/desispec_stack.sh makes one (Debian's python3-numba, -fitsio, -healpy and "
       "desispec, desiutil, desitarget, specter, gpu_specter, desimodel from GitHub) in "
       "../desistack, "
       "or set SPEXD_DESISPEC_PATH to a stack folder or to a PYTHONPATH holding desispec")


def stack_dir():
    """The stack folder (scripts/desispec_stack.sh layout), or None. A set
    $SPEXD_DESISPEC_PATH is the only place looked at (`=none`: only an installed desispec)."""
    candidate = os.environ.get("SPEXD_DESISPEC_PATH") or os.path.join(SRC, "..", "desistack")
    if ":" not in candidate and os.path.isdir(os.path.join(candidate, "desispec", "py")):
        return os.path.abspath(candidate)
    return None


def python_path():
    """The folders to put on sys.path / PYTHONPATH (empty: rely on an installed desispec)."""
    root = stack_dir()
    if root:
        return [os.path.join(root, p, "py") for p in PACKAGES
                if os.path.isdir(os.path.join(root, p, "py"))]
    given = os.environ.get("SPEXD_DESISPEC_PATH", "")
    return [p for p in given.split(":") if p]


def why_not(*modules):
    """Puts the stack on sys.path and imports desispec.io and `modules`: None, or why not."""
    # desiutil logs every step at INFO: only warnings and errors in the test output.
    os.environ.setdefault("DESI_LOGLEVEL", "WARNING")
    for p in reversed(python_path()):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        import desispec.io  # noqa: F401
        for m in modules:
            __import__(m)
    except ImportError as e:
        return f"desispec is not importable ({e}). {HOW}."
    return None


def require(*modules):
    """why_not(), or exit 77 (ctest: skipped) saying why and how to provide desispec."""
    why = why_not(*modules)
    if why:
        print(f"Skipped: {why}", flush=True)
        sys.exit(77)


def subprocess_env(base=None):
    """`base` (default os.environ) with the stack first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env.setdefault("DESI_LOGLEVEL", "WARNING")
    env["PYTHONPATH"] = ":".join(python_path() + [env.get("PYTHONPATH", "")]).strip(":")
    return env


def script(name):
    """A desispec command-line script (bin/NAME in the stack, else on PATH), or None."""
    root = stack_dir()
    if root and os.path.exists(os.path.join(root, "desispec", "bin", name)):
        return os.path.join(root, "desispec", "bin", name)
    from shutil import which
    return which(name)


def versions():
    """{package: version} as desiutil.depend records them, plus STACK.txt's commits."""
    from astropy.io import fits
    from desiutil.depend import add_dependencies

    hdr = fits.Header()
    add_dependencies(hdr)
    out = {hdr[f"DEPNAM{i:02d}"]: hdr[f"DEPVER{i:02d}"] for i in range(100)
           if f"DEPNAM{i:02d}" in hdr and hdr[f"DEPVER{i:02d}"] != "NOT_SET"}
    root = stack_dir()
    if root and os.path.exists(os.path.join(root, "STACK.txt")):
        with open(os.path.join(root, "STACK.txt")) as f:
            for line in f:
                name, _, rest = line.strip().partition(" ")
                if name in out:
                    out[name] += f" ({rest})"
    return out
