"""Channel, credentials and the one retry policy of the sync and grpc.aio clients.

They mirror the C++ client (client/lib/spexd_client.cc): round_robin load balancing (a
``dns:///name:port`` target resolving to several replicas, or an
``ipv4:a:p1,b:p2`` list, spreads calls over them), 64 MiB receive limit, a deadline on
every admin call (60 s) and optionally on an extraction, and up to ``retries``
attempts on UNAVAILABLE with a doubling backoff (0.2 s, at most 5 s) jittered to
50-100 %. A RESOURCE_EXHAUSTED that the server marks transient (trailing metadata
``spexd-retryable``: queue or upload slots full) is retried with the same backoff for up
to ``queue_wait`` seconds, never past the extraction deadline; ``retries=1`` turns every
retry off (docs/service.md, "Limits"). Both clients build themselves with ``connect``
and retry through ``Retrier.pause_or_raise`` / ``after_stream_error``, so that their
loops differ only in how they sleep (time.sleep or asyncio.sleep).
"""
import atexit
import dataclasses
import gc
import ipaddress
import random
import time
import warnings

import grpc

from spexd.errors import from_rpc_error

# gRPC Python's call objects take their call's lock when they are collected (its
# _channel.py, __del__). A failed call kept in a reference cycle (the traceback of the
# error raised for it) is otherwise collected during the interpreter's finalisation, when
# gRPC's daemon threads are frozen and one may hold that lock: the program then hangs after
# its work is done (one refused spexd-desi-extract run in a hundred, two at a time). A
# collection at exit, while those threads still run, finalises such calls first (atexit
# runs the last registered first: this before anything gRPC registered on its import).
atexit.register(gc.collect)

# Replies are at most 4 MiB by contract; slack for a server with a larger limit.
MAX_RECEIVE_BYTES = 64 << 20
UPLOAD_CHUNK_BYTES = 1 << 20  # well under the 4 MiB message limit
RETRYABLE = (grpc.StatusCode.UNAVAILABLE,)
QUEUE_FULL_KEY = "spexd-retryable"  # server/platform/status_util.cc sets it on transient refusals


@dataclasses.dataclass
class Tls:
    """TLS settings (PEM bytes, not paths). Empty root_certs: the system roots."""

    root_certs: bytes = None
    client_cert: bytes = None  # mutual TLS
    client_key: bytes = None
    server_name: str = None    # overrides the name checked in the certificate


@dataclasses.dataclass
class Policy:
    retries: int = 4               # attempts per call on UNAVAILABLE
    deadline: float = 60.0         # admin calls, PSF uploads included (seconds)
    extract_deadline: float = None  # whole extraction; None = none
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    queue_wait: float = 600.0       # how long a "queue full" is retried (seconds)

    def backoffs(self):
        """Sleeps between attempts: retries - 1 of them."""
        b = self.initial_backoff
        for _ in range(max(1, self.retries) - 1):
            yield b * random.uniform(0.5, 1.0)
            b = min(b * 2, self.max_backoff)


def is_queue_full(rpc_error):
    """RESOURCE_EXHAUSTED that the server marked transient (a full queue, not a request
    that can never fit)."""
    if rpc_error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return False
    try:
        trailing = rpc_error.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - an error raised before any call has none
        return False
    return any(key == QUEUE_FULL_KEY for key, _ in trailing)


class Retrier:
    """The pause before the next attempt of one call, or None to give up."""

    def __init__(self, policy):
        self._policy = policy
        self._unavailable = policy.backoffs()
        self._queue_backoff = policy.initial_backoff
        self._start = time.monotonic()

    def pause(self, rpc_error):
        if rpc_error.code() in RETRYABLE:
            return next(self._unavailable, None)
        if self._policy.retries <= 1 or not is_queue_full(rpc_error):
            return None
        window = self._policy.queue_wait
        if self._policy.extract_deadline is not None:
            window = min(window, self._policy.extract_deadline)
        pause = self._queue_backoff * random.uniform(0.5, 1.0)
        self._queue_backoff = min(self._queue_backoff * 2, self._policy.max_backoff)
        if time.monotonic() - self._start + pause > window:
            return None
        return pause

    def pause_or_raise(self, rpc_error):
        """The pause before the next attempt; raises the SpexdError of `rpc_error` when
        the policy gives up. Call it inside the ``except grpc.RpcError`` block."""
        pause = self.pause(rpc_error)
        if pause is None:
            raise from_rpc_error(rpc_error) from None
        return pause


RELOAD_PSF = "reload"


def after_stream_error(rpc_error, received, reloaded, own_psf, retrier):
    """What an extraction stream does after an error, for the sync and aio clients alike:
    RELOAD_PSF (the PSF was evicted between LoadPsf and the extraction: load it again,
    once, as spexctl), a pause before the next attempt (UNAVAILABLE or a full queue, only
    while nothing arrived, so a consumer never sees a bundle twice), or it raises the
    SpexdError. Call it inside the ``except grpc.RpcError`` block."""
    if received:
        raise from_rpc_error(rpc_error) from None
    if rpc_error.code() == grpc.StatusCode.NOT_FOUND and not reloaded and own_psf:
        return RELOAD_PSF
    return retrier.pause_or_raise(rpc_error)


def renamed(new_value, old_value, new, old, default=None):
    """The value of an argument that has a deprecated spelling (docs/service.md, "Option
    names"): the new one, else the old one (with a DeprecationWarning), else default."""
    if old_value is None:
        return default if new_value is None else new_value
    if new_value is not None and new_value != old_value:
        raise ValueError(f"give {new}= or its deprecated spelling {old}=, not both")
    warnings.warn(f"{old}= is deprecated: use {new}=", DeprecationWarning, stacklevel=3)
    return old_value


@dataclasses.dataclass
class Connection:
    """What a client is built from: checked once for the sync and the aio client."""

    target: str
    policy: Policy
    credentials: object  # grpc.ChannelCredentials or None (plaintext)
    options: list        # channel arguments
    metadata: tuple      # call metadata (the bearer token) or None

    def open(self, grpc_module):
        """A channel from `grpc_module`: grpc (sync) or grpc.aio."""
        if self.credentials:
            return grpc_module.secure_channel(self.target, self.credentials, options=self.options)
        return grpc_module.insecure_channel(self.target, options=self.options)


def connect(server=None, tls=False, auth_token=None, retries=4, deadline=60.0,
            extract_deadline=None, queue_wait=600.0, target=None, token=None):
    """The constructor arguments of spexd.Client and spexd.aio.Client (same names as
    spexctl's flags; target= and token= are the deprecated spellings of server= and
    auth_token=) as a Connection."""
    server = renamed(server, target, "server", "target")
    auth_token = renamed(auth_token, token, "auth_token", "token")
    if not server:
        raise ValueError("no server address")
    if retries < 1:
        raise ValueError("retries must be >= 1")
    if queue_wait < 0:
        raise ValueError("queue_wait must be >= 0")
    policy = Policy(retries=retries, deadline=deadline, extract_deadline=extract_deadline,
                    queue_wait=queue_wait)
    return Connection(server, policy, credentials(tls), channel_args(tls, server),
                      metadata(auth_token))


def is_local_target(target):
    """Whether a gRPC target is this host: a loopback address, localhost or a Unix socket
    (as the C++ client's IsLocalTarget). Such channels take no proxy from http_proxy,
    https_proxy or grpc_proxy: a proxy cannot reach this host's loopback."""
    t = target
    if t.startswith(("unix:", "unix-abstract:")):
        return True
    if t.startswith("dns:"):
        t = t[len("dns:"):]
        if t.startswith("//"):  # dns:///host:port or dns://AUTHORITY/host:port
            _, sep, t = t[2:].partition("/")
            if not sep:
                return False
    elif t.startswith("ipv4:"):
        t = t[len("ipv4:"):]
    elif t.startswith("ipv6:"):
        t = t[len("ipv6:"):]
    if not t:
        return False
    for address in t.split(","):
        host = address
        if host.startswith("["):
            host = host[1:].partition("]")[0]
        elif host.count(":") == 1:
            host = host.partition(":")[0]
        if host.lower() == "localhost":
            continue
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False  # another name: the resolver and any proxy decide
        if ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None
                              and ip.ipv4_mapped.is_loopback):
            continue
        return False
    return True


def channel_args(tls, target=""):
    opts = [("grpc.lb_policy_name", "round_robin"),
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
    if is_local_target(target):
        opts.append(("grpc.enable_http_proxy", 0))
    if isinstance(tls, Tls) and tls.server_name:
        opts.append(("grpc.ssl_target_name_override", tls.server_name))
    return opts


def credentials(tls):
    """None for plaintext, else grpc.ChannelCredentials (tls=True: system roots)."""
    if not tls:
        return None
    t = tls if isinstance(tls, Tls) else Tls()
    return grpc.ssl_channel_credentials(root_certificates=t.root_certs,
                                        private_key=t.client_key,
                                        certificate_chain=t.client_cert)


def metadata(token):
    return (("authorization", f"Bearer {token}"),) if token else None
