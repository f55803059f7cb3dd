"""Channel, credentials and retry policy shared by the sync and grpc.aio clients.

They mirror the C++ client (client/spexd_client.cc): round_robin load balancing (a
``dns:///name:port`` target resolving to several replicas, or an
``ipv4:a:p1,b:p2`` list, spreads calls over them), 64 MiB receive limit, a deadline on
every admin call (60 s) and optionally on an extraction, and up to ``retries``
attempts on UNAVAILABLE with a doubling backoff (0.2 s, at most 5 s) jittered to
50-100 %. A RESOURCE_EXHAUSTED that the server marks transient (trailing metadata
``spexd-retryable``: queue or upload slots full) is retried with the same backoff for up
to ``queue_wait`` seconds, never past the extraction deadline; ``retries=1`` turns every
retry off (docs/service.md, "Limits").
"""
import dataclasses
import random
import time

import grpc

# Replies are at most 4 MiB by contract; slack for a server with a larger limit.
MAX_RECEIVE_BYTES = 64 << 20
UPLOAD_CHUNK_BYTES = 1 << 20  # well under the 4 MiB message limit
RETRYABLE = (grpc.StatusCode.UNAVAILABLE,)
QUEUE_FULL_KEY = "spexd-retryable"  # server/status_util.cc sets it on transient refusals


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


RELOAD_PSF = "reload"


def after_stream_error(rpc_error, err, received, reloaded, own_psf, retrier):
    """What an extraction stream does after an error, for the sync and aio clients alike:
    RELOAD_PSF (the PSF was evicted between LoadPsf and the extraction: load it again,
    once, as spexctl), a pause before the next attempt (UNAVAILABLE or a full queue, only
    while nothing arrived, so a consumer never sees a bundle twice), or None (raise)."""
    if received:
        return None
    if err.code == grpc.StatusCode.NOT_FOUND and not reloaded and own_psf:
        return RELOAD_PSF
    return retrier.pause(rpc_error)


def channel_args(tls):
    opts = [("grpc.lb_policy_name", "round_robin"),
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
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
