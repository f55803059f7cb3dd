"""Python client of the spexd spectral extraction service (spexd.v1).

    import spexd
    client = spexd.Client("host:port")
    result = client.extract(image=image, ivar=ivar, mask=mask, psf="psf.fits",
                            wavelength=(5760.0, 7620.0, 0.8), nspec=500)
    frame = result.to_desispec()      # desispec.frame.Frame, no file written

spexd.aio.Client is the asyncio (grpc.aio) twin; spexd.qa draws a frame's QA page.
Runs on Debian's /usr/bin/python3 with python3-grpcio, python3-protobuf, python3-numpy,
python3-astropy (to upload numpy arrays and write frame files; a local preproc file uploads
without it); spexd.qa needs python3-fitsio instead, and python3-matplotlib to draw its page (the
package's "qa" extra).
"""
__version__ = "0.1.0"  # core/base/version.h (kSpexdVersion); a test keeps them equal

from spexd._channel import Tls  # noqa: E402
from spexd.errors import (  # noqa: E402
    SpexdError, InvalidArgument, NotFound, PermissionDenied, AlreadyExists, ResourceExhausted,
    Unavailable, Unauthenticated, DeadlineExceeded, Cancelled, FailedPrecondition, Internal,
    DataLoss, DesispecUnavailable)
from spexd.client import Client, BundleStream, ExposureStream  # noqa: E402
from spexd.exposure import ExposureResult, FrameResult, frames_from_list  # noqa: E402
from spexd.result import Bundle, ExtractionResult  # noqa: E402
from spexd import aio  # noqa: E402

__all__ = ["Client", "BundleStream", "ExposureStream", "ExposureResult", "FrameResult",
           "frames_from_list", "Bundle", "ExtractionResult", "Tls", "aio",
           "SpexdError", "InvalidArgument", "NotFound", "PermissionDenied", "AlreadyExists",
           "ResourceExhausted", "Unavailable", "Unauthenticated", "DeadlineExceeded",
           "Cancelled", "FailedPrecondition", "Internal", "DataLoss", "DesispecUnavailable"]
