"""One name per idea across spexd, spexctl and the Python client, and the
command lines that refuse what they do not know. No server runs: the binaries print
their help or refuse their flags, and the Python signatures are inspected.

SHARED lists every idea that two or more of the three programs expose, under its
canonical name (spexctl spells it with dashes, spexd and Python with underscores).
DEPRECATED lists the old spellings that are still accepted. The test fails when a
program spells a shared idea differently, drops an old spelling, or when a name appears
in two programs without being declared here: add it to SHARED (and to the table in
docs/service.md, "Option names") after checking that it means the same thing in both.
"""
import inspect
import os
import re
import subprocess
import unittest
import warnings

import grpc

import spexd
import spexd.aio
from spexd import request
from spexd.v1 import spexd_pb2 as pb

BIN = os.environ.get("SPEXD_BIN_DIR", "")
SPEXD = os.path.join(BIN, "spexd")
SPEXCTL = os.path.join(BIN, "spexctl")

SPEXD_ONLY, SPEXCTL_ONLY, PYTHON_ONLY = {"spexd"}, {"spexctl"}, {"python"}
BOTH_CLIENTS = {"spexctl", "python"}
SHARED = {
    "backend": {"spexd", "spexctl"},
    "cpu_threads": {"spexd", "spexctl"},
    "auth_token_file": {"spexd", "spexctl"},
    "tls_cert": {"spexd", "spexctl"},  # this side's certificate (server's, or client's)
    "tls_key": {"spexd", "spexctl"},
    "server": BOTH_CLIENTS,
    "psf": BOTH_CLIENTS,  # a local PSF file (uploaded unless spexctl --server-path)
    # The input is a path on the server: a switch for -i/-p in spexctl, the image's path
    # in Python (its PSF then goes in psf_server_path=).
    "server_path": BOTH_CLIENTS,
    "tls": BOTH_CLIENTS,
    "deadline": BOTH_CLIENTS,
    "retries": BOTH_CLIENTS,
    "queue_wait": BOTH_CLIENTS,
    "priority": BOTH_CLIENTS,
    "bundles": BOTH_CLIENTS,
    "fibers": BOTH_CLIENTS,
    "server_output_path": BOTH_CLIENTS,
    "server_overwrite": BOTH_CLIENTS,  # a server-side output may replace a file
    "server_checksum": BOTH_CLIENTS,  # SHA-256 or CRC-32 of the server-written files
    # Arrays on the wire: float32 (spexctl's default for -o; same file) or float64
    # (Python's default: the in-memory results bit for bit).
    "wire_precision": BOTH_CLIENTS,
    "reproduce": BOTH_CLIENTS,
    "mask_policy": BOTH_CLIENTS,
    "wavelength": BOTH_CLIENTS,
    "specmin": BOTH_CLIENTS,
    "nspec": BOTH_CLIENTS,
    "bundlesize": BOTH_CLIENTS,
    "nsubbundles": BOTH_CLIENTS,
    "nwavestep": BOTH_CLIENTS,
    "wavepad": BOTH_CLIENTS,
    "regularize": BOTH_CLIENTS,
    "psferr": BOTH_CLIENTS,
    "wavepad_frac": BOTH_CLIENTS,
    "pixpad_frac": BOTH_CLIENTS,
    "barycentric_correction": BOTH_CLIENTS,
    "no_scores": BOTH_CLIENTS,
    # The FIBERMAP the frame carries: spexctl -f/--fibermap reads it from a file (Python:
    # fibermap_path=); Python's fibermap= gives the table of an uploaded array.
    "fibermap": BOTH_CLIENTS,
}
DEPRECATED = {
    "spexctl": {"threads": "cpu_threads", "compat": "reproduce",
                "token_file": "auth_token_file", "server_output": "server_output_path"},
    "python": {"compat": "reproduce", "target": "server", "token": "auth_token"},
}


def norm(name):
    return name.replace("-", "_")


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


def spexd_flags():
    out = run(SPEXD, "--help")
    return out, {m.group(1) for m in re.finditer(r"^\s+--([a-z0-9_]+) \(", out.stdout, re.M)}


def spexctl_flags():
    out = run(SPEXCTL, "extract", "--help")
    names, deprecated = set(), {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s+(?:-\w, )?\s*--([a-z0-9-]+)", line)
        if not m:
            continue
        names.add(norm(m.group(1)))
        d = re.search(r"deprecated spelling of --([a-z0-9-]+)", line)
        if d:
            deprecated[norm(m.group(1))] = norm(d.group(1))
    return out, names, deprecated


def python_names():
    names = set()
    for fn in (spexd.Client.__init__, spexd.client.ExtractSpec.__init__,
               request.extraction_params):
        for p in inspect.signature(fn).parameters.values():
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self":
                names.add(p.name)
    return names


class OptionNamesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        _, cls.spexd = spexd_flags()
        _, cls.spexctl, cls.spexctl_deprecated = spexctl_flags()
        cls.python = python_names()
        cls.by_program = {"spexd": cls.spexd, "spexctl": cls.spexctl, "python": cls.python}

    def test_shared_ideas_have_their_canonical_name_everywhere(self):
        for idea, programs in SHARED.items():
            for program in programs:
                self.assertIn(idea, self.by_program[program],
                              f"{program} lacks {idea} (canonical name of a shared option)")

    def test_deprecated_spellings_are_still_accepted_and_marked(self):
        for program, aliases in DEPRECATED.items():
            for old, new in aliases.items():
                self.assertIn(old, self.by_program[program], f"{program} dropped {old}")
        self.assertEqual(self.spexctl_deprecated, DEPRECATED["spexctl"])

    def test_no_undeclared_name_is_shared(self):
        aliases = {old for a in DEPRECATED.values() for old in a}
        names = {}
        for program, found in self.by_program.items():
            for n in found - set(DEPRECATED.get(program, {})):
                names.setdefault(n, set()).add(program)
                self.assertNotIn(n, aliases, f"{program} uses {n}, a deprecated spelling")
        shared = {n: p for n, p in names.items() if len(p) > 1}
        for n, programs in shared.items():
            self.assertIn(n, SHARED, f"{n} is in {sorted(programs)}: declare it in SHARED")
            self.assertEqual(programs, SHARED[n], n)

    def test_sync_and_aio_clients_take_the_same_arguments(self):
        self.assertEqual(inspect.signature(spexd.Client.__init__),
                         inspect.signature(spexd.aio.Client.__init__))

    def test_python_params_cover_every_proto_field(self):
        params = set(inspect.signature(request.extraction_params).parameters)
        by_python = {"wmin": "wavelength", "wmax": "wavelength", "dw": "wavelength",
                     "compat": "reproduce"}
        for field in pb.ExtractionParams.DESCRIPTOR.fields:
            self.assertIn(by_python.get(field.name, field.name), params, field.name)


class AliasesTest(unittest.TestCase):
    def test_python_old_spellings_give_the_same_request(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            old = request.extraction_params(compat="cpu")
            with spexd.Client(target="127.0.0.1:1", token="t") as c:
                self.assertEqual(c.target, "127.0.0.1:1")
                self.assertEqual(c._metadata, (("authorization", "Bearer t"),))
        self.assertEqual(old, request.extraction_params(reproduce="gpu_specter_cpu"))
        self.assertEqual(request.extraction_params(reproduce="gpu_specter_gpu").compat,
                         pb.COMPAT_GPU)
        with self.assertRaises(ValueError):
            request.extraction_params(reproduce="gpu_specter_gpu", compat="cpu")
        with self.assertRaises(ValueError):
            request.extraction_params(reproduce="cuda")

    def test_spexctl_old_spellings_pass_flag_parsing(self):
        # Exit 2 is a command-line error; 1 is the missing input file, after parsing.
        base = [SPEXCTL, "extract", "--local", "-q", "-i", "/nonexistent/in.fits", "-p",
                "/nonexistent/psf.fits", "-o", "/nonexistent/out.fits"]
        for extra in (["--threads", "1", "--compat", "cpu"],
                      ["--cpu-threads", "1", "--reproduce", "gpu_specter_cpu"]):
            out = run(*base, *extra)
            self.assertEqual(out.returncode, 1, out.stderr)
        out = run(*base, "--threads", "1", "--cpu-threads", "2")
        self.assertEqual(out.returncode, 2)
        self.assertIn("same option", out.stderr)
        out = run(*base, "--reproduce", "cuda")
        self.assertEqual(out.returncode, 2)
        self.assertIn("gpu_specter_gpu or gpu_specter_cpu", out.stderr)


class CommandLineTest(unittest.TestCase):
    def test_spexd_help_lists_every_flag_with_its_help(self):
        out, flags = spexd_flags()  # exit status 1, as absl's --help always ends
        self.assertNotIn("No flags matched", out.stdout + out.stderr)
        for flag in ("listen", "data_roots", "backend", "cpu_threads", "log_level", "config"):
            self.assertIn(flag, flags)
        self.assertIn("gRPC address", out.stdout)

    def test_spexd_refuses_an_unknown_log_level(self):
        out = run(SPEXD, "--log_level=banana", "--listen=127.0.0.1:0", "--metrics_listen=")
        self.assertNotEqual(out.returncode, 0)
        text = out.stdout + out.stderr
        self.assertIn("--log_level", text)
        self.assertIn("banana", text)
        self.assertIn("debug, info, warning or error", text)

    def test_spexd_refuses_bad_values_before_serving(self):
        for bad in ("--backend=gpu", "--gpu_devices=x", "--max_queue=-1"):
            out = run(SPEXD, bad, "--listen=127.0.0.1:0", "--metrics_listen=")
            self.assertEqual(out.returncode, 1, bad)
            self.assertIn("startup_failed", out.stdout + out.stderr, bad)

    def test_options_that_only_chose_how_the_same_bytes_are_made_are_gone(self):
        # One path per behaviour: the progressive frame file is spexctl's only way to write
        # -o without -m, and spexd's GPU host threads always block while the GPU works.
        _, spexd_names = spexd_flags()
        self.assertNotIn("gpu_host_wait", spexd_names)
        out = run(SPEXD, "--gpu_host_wait=spin", "--listen=127.0.0.1:0", "--metrics_listen=")
        self.assertNotEqual(out.returncode, 0)
        _, spexctl_names, _ = spexctl_flags()
        self.assertNotIn(norm("no-progressive-write"), spexctl_names)
        out = run(SPEXCTL, "extract", "--no-progressive-write", "-i", "x.fits", "-p", "p.fits",
                  "-o", "f.fits", "--server", "127.0.0.1:1")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("no-progressive-write", out.stdout + out.stderr)

    def test_spexctl_help(self):
        out = run(SPEXCTL, "--help")
        self.assertEqual(out.returncode, 0)
        self.assertIn("spexctl extract", out.stdout)
        out, flags, _ = spexctl_flags()
        self.assertEqual(out.returncode, 0)
        self.assertIn("reproduce", flags)
        self.assertIn("not where the work runs", out.stdout)
        self.assertEqual(run(SPEXCTL).returncode, 2)  # no subcommand: usage error


class SharedRetryPolicyTest(unittest.TestCase):
    """The one retry policy both clients loop through (spexd/_channel.py)."""

    class Refusal(grpc.RpcError):
        def __init__(self, code):
            self._code = code

        def code(self):
            return self._code

        def details(self):
            return "refused"

        def trailing_metadata(self):
            return ()

    def test_stream_errors(self):
        from spexd import _channel
        policy = _channel.Policy(retries=2)
        down = self.Refusal(grpc.StatusCode.UNAVAILABLE)
        gone = self.Refusal(grpc.StatusCode.NOT_FOUND)
        r = _channel.Retrier(policy)
        self.assertEqual(_channel.after_stream_error(gone, False, False, True, r),
                         _channel.RELOAD_PSF)
        with self.assertRaises(spexd.NotFound):  # reloaded once already
            _channel.after_stream_error(gone, False, True, True, r)
        self.assertGreater(_channel.after_stream_error(down, False, False, True, r), 0)
        with self.assertRaises(spexd.Unavailable):  # retries spent
            _channel.after_stream_error(down, False, False, True, r)
        with self.assertRaises(spexd.Unavailable):  # bundles arrived: never retried
            _channel.after_stream_error(down, True, False, True, _channel.Retrier(policy))
        with self.assertRaises(spexd.InvalidArgument):
            _channel.Retrier(policy).pause_or_raise(self.Refusal(grpc.StatusCode.INVALID_ARGUMENT))

    def test_a_file_only_stream_is_retried_after_its_header(self):
        # extract_to_server hands its consumer nothing but the summary: a server lost after
        # the header (or after writing the frame) is asked again, and a bundle stream not.
        import types
        from spexd import _channel
        from spexd.client import StreamState
        down = self.Refusal(grpc.StatusCode.UNAVAILABLE)
        client = types.SimpleNamespace(policy=_channel.Policy(retries=3))
        for file_only in (True, False):
            spec = types.SimpleNamespace(file_only=file_only, psf_id="a" * 64)
            state = StreamState(client, spec)
            state._asm = types.SimpleNamespace(header=pb.FrameHeader())
            if file_only:
                self.assertGreater(state._after_error(down), 0)
            else:
                with self.assertRaises(spexd.Unavailable):
                    state._after_error(down)

    def test_connect_checks_the_arguments_once(self):
        from spexd import _channel
        for bad in (dict(), dict(server="h:1", retries=0), dict(server="h:1", queue_wait=-1),
                    dict(server="h:1", target="h:2")):
            with self.assertRaises(ValueError, msg=str(bad)):
                _channel.connect(**bad)
        conn = _channel.connect("h:1", auth_token="t", queue_wait=5)
        self.assertEqual(conn.policy.queue_wait, 5)
        self.assertEqual(conn.metadata, (("authorization", "Bearer t"),))
