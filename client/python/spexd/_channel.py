"""Channel, credentials and retry policy shared by the sync and grpc.aio clients.

They mirror the C++ client (client/spexd_client.cc): round_robin load balancing (a
``dns:///name:port`` target resolving to several replicas, or an
``ipv4:a:p1,b:p2`` list, spreads calls over them), 64 MiB receive limit, a deadline on
every admin call (60 s) and optionally on an extraction, and up to ``retries``
attempts on UNAVAILABLE with a doubling backoff (0.2 s, at most 5 s) jittered to
50-100 %.
"""
import dataclasses
import random

import grpc

# Replies are at most 4 MiB by contract; slack for a server with a larger limit.
MAX_RECEIVE_BYTES = 64 << 20
UPLOAD_CHUNK_BYTES = 1 << 20  # well under the 4 MiB message limit
RETRYABLE = (grpc.StatusCode.UNAVAILABLE,)


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

    def backoffs(self):
        """Sleeps between attempts: retries - 1 of them."""
        b = self.initial_backoff
        for _ in range(max(1, self.retries) - 1):
            yield b * random.uniform(0.5, 1.0)
            b = min(b * 2, self.max_backoff)


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
