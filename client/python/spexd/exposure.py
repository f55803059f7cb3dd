"""An exposure as one job (ExtractExposure, docs/python-client.md "Exposures").

    frames = [dict(server_path="preproc-b0.fits", psf_server_path="psf-b0.fits",
                   server_output_path="frame-b0.fits"), ...]      # server paths
    for r in client.iter_exposure(frames, wavelength=(3600.0, 5800.0, 0.8), nspec=500):
        print(r.index, r.ok, r.server_output_path, r.message)     # as each frame finishes
    result = client.extract_exposure(frames, ...)                 # all, in frame order

Each frame is read and written by the server (its data and output roots); the file is
the one `spexctl extract --server-path --server-output-path` makes for that frame. The
extraction parameters given as keywords apply to every frame; a frame's dict may set its
own. One deadline (the client's extract_deadline) covers the whole exposure. A frame that
fails carries its status; the others go on.

Shared by the sync and the grpc.aio client (no network I/O here).
"""
import grpc

from spexd import request
from spexd.errors import _BY_CODE, SpexdError
from spexd.v1 import spexd_pb2 as pb

_CODES = {c.value[0]: c for c in grpc.StatusCode}
_FRAME_KEYS = ("server_path", "psf_server_path", "psf_id", "server_output_path",
               "fibermap_path", "client_tag")


class FrameResult:
    """One frame's end: ``index`` (in the frames given), ``code`` (grpc.StatusCode),
    ``message``, ``ok``, ``server_path``, ``server_output_path`` (the file written when
    ok) and ``summary`` (ExtractSummary when ok, else None). ``error()`` is the
    SpexdError the frame would have raised alone, or None."""

    def __init__(self, index, code, message, server_path, server_output_path, summary=None):
        self.index = index
        self.code = code
        self.message = message
        self.server_path = server_path
        self.server_output_path = server_output_path
        self.summary = summary

    @property
    def ok(self):
        return self.code == grpc.StatusCode.OK

    def error(self):
        if self.ok:
            return None
        return _BY_CODE.get(self.code, SpexdError)(self.message, code=self.code)

    def __repr__(self):
        return (f"FrameResult({self.index}, {self.code.name}, {self.server_output_path!r}"
                f"{'' if self.ok else ', ' + repr(self.message)})")


class ExposureResult:
    """Every frame's FrameResult in frame order (``frames``), ``failed`` (those not ok)
    and ``total_seconds`` (the server's, arrival to the last frame)."""

    def __init__(self, frames, total_seconds):
        self.frames = frames
        self.total_seconds = total_seconds

    @property
    def failed(self):
        return [f for f in self.frames if not f.ok]


class ExposureSpec:
    """The frames of one exposure, their PSFs and the request (built once the PSF ids
    are known)."""

    def __init__(self, frames, priority=None, overwrite=False, client_tag=None,
                 server_checksum=None, **params):
        if not frames:
            raise ValueError("an exposure needs at least one frame")
        self.frames = []
        for i, f in enumerate(frames):
            f = dict(f)
            unknown_psf = sum(f.get(k) is not None for k in ("psf_server_path", "psf_id")) != 1
            if unknown_psf or not f.get("server_path") or not f.get("server_output_path"):
                raise ValueError(f"frames[{i}]: needs server_path, server_output_path and "
                                 "one of psf_server_path or psf_id (server paths)")
            own = {k: v for k, v in f.items() if k not in _FRAME_KEYS}
            merged = {**params, **own}
            fibermap = f.get("fibermap_path")
            header = request.extract_header(
                "", request.extraction_params(**merged), server_path=f["server_path"],
                server_output_path=f["server_output_path"], in_img_name=f["server_path"],
                in_psf_name=f.get("psf_server_path") or f["psf_id"],
                client_tag=f.get("client_tag"), output_checksum=server_checksum,
                fibermap_fits=None if fibermap is None else request.fibermap_file_bytes(fibermap))
            header.overwrite = bool(overwrite)
            self.frames.append((f.get("psf_server_path"), f.get("psf_id"), header))
        self.priority = request._choice(request._PRIORITY, priority, "priority")
        self.client_tag = client_tag or ""

    def psf_paths(self):
        """The distinct PSF server paths to load."""
        return sorted({p for p, _, _ in self.frames if p is not None})

    def request(self, psf_ids):
        """(ExposureRequest, entry of each request frame, FrameResults of the frames
        whose PSF did not load). `psf_ids`: path -> PsfInfo.id or a SpexdError."""
        req = pb.ExposureRequest(priority=self.priority, client_tag=self.client_tag)
        entries, refused = [], []
        for i, (path, psf_id, header) in enumerate(self.frames):
            got = psf_id if path is None else psf_ids[path]
            if isinstance(got, SpexdError):
                refused.append(FrameResult(i, got.code or grpc.StatusCode.UNKNOWN,
                                           f"PSF {path}: {got}", header.server_path,
                                           header.server_output_path))
                continue
            h = req.frames.add()
            h.CopyFrom(header)
            h.psf_id = got
            entries.append(i)
        return req, entries, refused

    @staticmethod
    def result(frame, entries):
        """The FrameResult of a server's ExposureFrameResult."""
        code = _CODES.get(frame.code, grpc.StatusCode.UNKNOWN)
        return FrameResult(entries[frame.index], code, frame.message, frame.server_path,
                           frame.server_output_path,
                           frame.summary if code == grpc.StatusCode.OK else None)


def frames_from_list(path):
    """The frames of a frame list file: lines "PREPROC PSF OUTPUT" (server paths; blank
    lines and '#' comments skipped). Per-line flags are spexctl's; give parameters as
    keywords (or per frame dict) here."""
    frames = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            cols = line.split()
            if not cols or cols[0].startswith("#"):
                continue
            if len(cols) != 3:
                raise ValueError(f"{path}:{n}: expected PREPROC PSF OUTPUT")
            frames.append(dict(server_path=cols[0], psf_server_path=cols[1],
                               server_output_path=cols[2]))
    if not frames:
        raise ValueError(f"{path}: no frames")
    return frames
