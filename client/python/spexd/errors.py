"""Exceptions of the spexd client: one class per gRPC status the service documents.

Every error raised by a call carries the gRPC status code (``err.code``, a
``grpc.StatusCode``) and the server's message (``err.details``), so a pipeline can
catch ``spexd.NotFound`` or ``spexd.SpexdError`` and decide whether to retry.
"""
import grpc


class SpexdError(Exception):
    """A failed spexd call: ``code`` (grpc.StatusCode) and ``details`` (server message)."""

    code = grpc.StatusCode.UNKNOWN

    def __init__(self, details, code=None):
        if code is not None:
            self.code = code
        self.details = details
        super().__init__(f"{self.code.name}: {details}")


class InvalidArgument(SpexdError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(SpexdError):
    code = grpc.StatusCode.NOT_FOUND


class PermissionDenied(SpexdError):
    code = grpc.StatusCode.PERMISSION_DENIED


class AlreadyExists(SpexdError):
    """A server-side output file exists and the request did not allow overwriting it."""

    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(SpexdError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(SpexdError):
    code = grpc.StatusCode.UNAVAILABLE


class Unauthenticated(SpexdError):
    code = grpc.StatusCode.UNAUTHENTICATED


class DeadlineExceeded(SpexdError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(SpexdError):
    code = grpc.StatusCode.CANCELLED


class FailedPrecondition(SpexdError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Internal(SpexdError):
    code = grpc.StatusCode.INTERNAL


class DataLoss(SpexdError):
    """The stream broke the protocol (e.g. ended without a summary)."""

    code = grpc.StatusCode.DATA_LOSS


class DesispecUnavailable(ImportError):
    """desispec cannot be imported (it is not packaged in Debian)."""


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, NotFound, PermissionDenied, AlreadyExists, ResourceExhausted,
    Unavailable, Unauthenticated, DeadlineExceeded, Cancelled, FailedPrecondition, Internal,
    DataLoss)}


def from_rpc_error(err):
    """The SpexdError subclass for a grpc.RpcError (sync or grpc.aio)."""
    code = err.code() if callable(getattr(err, "code", None)) else grpc.StatusCode.UNKNOWN
    details = err.details() if callable(getattr(err, "details", None)) else str(err)
    cls = _BY_CODE.get(code, SpexdError)
    return cls(details or "", code=code)
