"""The synchronous spexd client.

    client = spexd.Client("host:port")            # or "dns:///name:port", tls=, auth_token=
    result = client.extract(image=img, ivar=ivar, mask=mask, psf="psf.fits",
                            wavelength=(5760.0, 7620.0, 0.8), specmin=0, nspec=500)
    frame = result.to_desispec()                  # or result.write("frame.fits")
"""
import os
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from spexd import _channel, request
from spexd.errors import SpexdError, from_rpc_error
from spexd.exposure import ExposureResult, ExposureSpec
from spexd.result import ExtractionResult, StreamAssembler
from spexd.v1 import spexd_pb2 as pb
from spexd.v1 import spexd_pb2_grpc as pb_grpc


def psf_load_requests(path=None, server_path=None):
    """LoadPsf messages: a server path, or a local file uploaded in chunks."""
    if (path is None) == (server_path is None):
        raise ValueError("give exactly one of path (local PSF file) or server_path")
    if server_path is not None:
        return [pb.LoadPsfRequest(server_path=server_path)]
    with open(path, "rb") as f:
        data = f.read()
    msgs = [pb.LoadPsfRequest(upload=pb.PsfUploadHeader(name=os.fspath(path), size=len(data)))]
    step = _channel.UPLOAD_CHUNK_BYTES
    return msgs + [pb.LoadPsfRequest(chunk=data[o:o + step]) for o in range(0, len(data), step)]


class ExtractSpec:
    """Everything one extraction call needs: how to get the PSF id, the header, the upload.

    Shared by the sync and the grpc.aio client (no I/O on the network here).
    """

    def __init__(self, image=None, ivar=None, mask=None, fibermap=None, header=None,
                 server_path=None, psf=None, psf_server_path=None, psf_id=None,
                 priority=None, want_model=False, server_output_path=None, bundles=None,
                 fibers=None, client_tag=None, flavor=None, camera=None, fibermap_path=None,
                 server_model_path=None, server_overwrite=False, wire_precision="float64",
                 results_to_file_only=False, server_checksum=None, **params):
        if sum(x is not None for x in (psf, psf_server_path, psf_id)) != 1:
            raise ValueError("give exactly one of psf (local file, uploaded), "
                             "psf_server_path or psf_id")
        if (image is None) == (server_path is None):
            raise ValueError("give exactly one of image (array or local preproc file, "
                             "uploaded) or server_path (preproc file on the server)")
        self.psf_path, self.psf_server_path, self.psf_id = psf, psf_server_path, psf_id
        self.upload = None
        in_img = server_path
        if image is not None:
            if isinstance(image, (str, os.PathLike)):
                with open(image, "rb") as f:
                    self.upload = f.read()
                in_img = os.fspath(image)
            else:
                if ivar is None:
                    raise ValueError("an image array needs its ivar")
                self.upload = request.preproc_fits_bytes(image, ivar, mask, fibermap, header,
                                                         flavor, camera)
                in_img = "upload"
        self.in_img = in_img
        self.in_psf = psf or psf_server_path or psf_id
        self.want_scores = not params.get("no_scores", False)
        self.subset = bool(bundles) or bool(fibers)
        if wire_precision not in ("float64", "float32"):
            raise ValueError(f"wire_precision must be float64 or float32, not {wire_precision!r}")
        if results_to_file_only and not server_output_path:
            raise ValueError("results_to_file_only needs server_output_path")
        self.file_only = bool(results_to_file_only)
        self._header_args = dict(
            params=request.extraction_params(**params), server_path=server_path,
            upload_size=None if self.upload is None else len(self.upload), priority=priority,
            want_model=want_model, server_output_path=server_output_path, bundles=bundles,
            fibers=fibers, in_img_name=in_img, in_psf_name=self.in_psf, client_tag=client_tag,
            server_model_path=server_model_path, overwrite=server_overwrite,
            results_to_file_only=self.file_only, float32=wire_precision == "float32",
            output_checksum=server_checksum,
            fibermap_fits=None if fibermap_path is None else request.fibermap_file_bytes(fibermap_path))

    def psf_requests(self):
        """The LoadPsf client stream, or None when a psf_id was given."""
        if self.psf_id is not None:
            return None
        return psf_load_requests(self.psf_path, self.psf_server_path)

    def psf_cache_key(self):
        """Identifies the PSF for the client's id cache; a local file that changed on
        disk (size or mtime) is uploaded again."""
        if self.psf_path is None:
            return ("server", self.psf_server_path)
        st = os.stat(self.psf_path)
        return ("local", os.path.abspath(self.psf_path), st.st_size, st.st_mtime_ns)

    def header(self, psf_id):
        return request.extract_header(psf_id, **self._header_args)


def file_only_spec(server_output_path, server_model_path, server_overwrite, kwargs):
    """The ExtractSpec of extract_to_server (sync and aio)."""
    return ExtractSpec(server_output_path=server_output_path,
                       server_model_path=server_model_path, server_overwrite=server_overwrite,
                       results_to_file_only=True, **kwargs)


def result_of(spec, stream, bundles):
    """The ExtractionResult of a finished stream (sync and aio)."""
    return ExtractionResult(stream.header, bundles, stream.summary, stream.model,
                            spec.in_psf, spec.in_img, server_mask=stream.mask,
                            server_scores=stream.scores, want_scores=spec.want_scores)


class StreamState:
    """One extraction stream's state and retry decisions, shared by the sync and the
    grpc.aio BundleStream (they differ only in how they iterate and sleep): ``header``
    (FrameHeader) once the first message arrived; ``summary`` (ExtractSummary),
    ``model`` (float64 [H, W] or None) and, for a float32 stream, ``mask`` and
    ``scores`` (the server's, of the float64 values) once the iteration ended.
    """

    def __init__(self, client, spec):
        self._client = client
        self._spec = spec
        self.header = None
        self.summary = None
        self.model = None
        self.mask = None
        self.scores = None
        self._asm = None
        self._call = None
        self._reloaded = False
        self._retrier = _channel.Retrier(client.policy)

    def _open(self, psf_id):
        """Starts one attempt: the call to iterate over."""
        c, spec = self._client, self._spec
        self._asm = StreamAssembler(file_only=spec.file_only)
        rpc = c._extraction.ExtractBundles if spec.subset else c._extraction.ExtractFrame
        self._call = rpc(request.request_messages(spec.header(psf_id), spec.upload),
                         timeout=c.policy.extract_deadline, metadata=c._metadata)
        return self._call

    def _feed(self, resp):
        """One response: a complete Bundle or None."""
        bundle = self._asm.feed(resp)
        self.header = self._asm.header
        return bundle

    def _end(self):
        self.summary = self._asm.summary
        self.model = self._asm.finish()
        self.mask, self.scores = self._asm.mask, self._asm.scores

    def _after_error(self, rpc_error):
        """After a failed attempt: True to load the PSF again, else the pause before the
        next attempt (or it raises, _channel.after_stream_error)."""
        # A file-only stream (extract_to_server) hands its consumer nothing but the
        # summary: asking again after a lost server repeats nothing (a frame it wrote is
        # then kept and named, docs/service.md "Server-written frames").
        received = (self._asm is not None and self._asm.header is not None
                    and not self._spec.file_only)
        action = _channel.after_stream_error(rpc_error, received, self._reloaded,
                                             self._spec.psf_id is None, self._retrier)
        self._reloaded = self._reloaded or action == _channel.RELOAD_PSF
        return action

    def _stop(self):
        """The consumer stopped early (or the attempt failed): the server stops too."""
        if self._call is not None and self.summary is None:
            self._call.cancel()
        self._call = None


class BundleStream(StreamState):
    """Iterates over the Bundles of one extraction as the server streams them."""

    def __iter__(self):
        psf_id = self._client._psf_id(self._spec)
        while True:
            try:
                yield from filter(None, map(self._feed, self._open(psf_id)))
                self._end()
                return
            except grpc.RpcError as e:
                psf_id = self._recover(e, psf_id)
            finally:
                self._stop()

    def _recover(self, rpc_error, psf_id):
        """Sleeps before the next attempt, or loads the PSF again: the PSF id to use."""
        action = self._after_error(rpc_error)
        if action == _channel.RELOAD_PSF:
            return self._client._psf_id(self._spec, reload=True)
        time.sleep(action)
        return psf_id


class ExposureState:
    """What the sync and asyncio exposure iterators share: the request, the retry rule
    (retry only while no frame result was received: a retry would run reported frames
    again) and the reading of each response."""

    def __init__(self, client, spec):
        self._client = client
        self._spec = spec
        self.total_seconds = None
        self._retrier = _channel.Retrier(client.policy)
        self._call = None
        self._received = False
        self._ended = False

    def _open(self, req):
        c = self._client
        self._received, self._ended = False, False
        self._call = c._extraction.ExtractExposure(req, timeout=c.policy.extract_deadline,
                                                   metadata=c._metadata)
        return self._call

    def _feed(self, resp, entries):
        """The FrameResult in `resp`, or None (the summary: total_seconds is set)."""
        if resp.HasField("frame"):
            self._received = True
            return ExposureSpec.result(resp.frame, entries)
        if resp.HasField("summary"):
            self.total_seconds = resp.summary.total_seconds
        return None

    def _pause_after(self, rpc_error):
        """Seconds to wait before the retry; raises when no retry is allowed."""
        if self._received:
            raise from_rpc_error(rpc_error) from None
        return self._retrier.pause_or_raise(rpc_error)

    def _stop(self):
        if self._call is not None and not self._ended:
            self._call.cancel()


class ExposureStream(ExposureState):
    """Iterates over the FrameResults of one exposure as the frames finish (frames whose
    PSF did not load first). ``total_seconds`` is set once the iteration ended. Stopping
    early cancels the call: the server stops every frame not finished."""

    def __iter__(self):
        c, spec = self._client, self._spec
        with ThreadPoolExecutor(max_workers=8) as pool:
            paths = spec.psf_paths()
            ids = dict(zip(paths, pool.map(c._psf_id_or_error, paths)))
        req, entries, refused = spec.request(ids)
        yield from refused
        if not entries:
            return
        while True:
            try:
                for resp in self._open(req):
                    if (result := self._feed(resp, entries)) is not None:
                        yield result
                self._ended = True
                return
            except grpc.RpcError as e:
                time.sleep(self._pause_after(e))
            finally:
                self._stop()


class Client:
    """Client of one spexd service (or several replicas behind one target).

    server: "host:port", "dns:///name:port" (every resolved replica, round-robin) or
    "ipv4:h1:p1,h2:p2". tls: False, True (system roots) or spexd.Tls(...). auth_token:
    the bearer token when the server requires one. retries: attempts on UNAVAILABLE.
    deadline: seconds for admin calls; extract_deadline: for a whole extraction;
    queue_wait: seconds a full server queue is retried. The names are spexctl's flags
    (docs/service.md, "Option names"); target= and token= are deprecated spellings.
    """

    def __init__(self, server=None, tls=False, auth_token=None, retries=4, deadline=60.0,
                 extract_deadline=None, queue_wait=600.0, target=None, token=None):
        conn = _channel.connect(server, tls, auth_token, retries, deadline, extract_deadline,
                                queue_wait, target, token)
        self.target, self.policy, self._metadata = conn.target, conn.policy, conn.metadata
        self._channel = conn.open(grpc)
        self._extraction = pb_grpc.ExtractionStub(self._channel)
        self._admin = pb_grpc.AdminStub(self._channel)
        self._psf_ids = {}

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, fn, *args):
        """One admin call with the call deadline, retried on UNAVAILABLE."""
        retrier = _channel.Retrier(self.policy)
        while True:
            try:
                return fn(*args, timeout=self.policy.deadline, metadata=self._metadata)
            except grpc.RpcError as e:
                time.sleep(retrier.pause_or_raise(e))

    # ------------------------------------------------------------------ admin
    def load_psf(self, path=None, server_path=None):
        """Loads a PSF (local file, uploaded; or a path on the server): its PsfInfo."""
        msgs = psf_load_requests(path, server_path)
        return self._call(lambda **kw: self._admin.LoadPsf(iter(msgs), **kw))

    def list_psfs(self):
        return self._call(self._admin.ListPsfs, pb.ListPsfsRequest())

    def unload_psf(self, psf_id):
        return self._call(self._admin.UnloadPsf, pb.UnloadPsfRequest(id=psf_id))

    def server_info(self):
        return self._call(self._admin.GetServerInfo, pb.GetServerInfoRequest())

    def _psf_id(self, spec, reload=False):
        if spec.psf_id is not None:
            return spec.psf_id
        key = spec.psf_cache_key()
        if reload or key not in self._psf_ids:
            msgs = spec.psf_requests()
            info = self._call(lambda **kw: self._admin.LoadPsf(iter(msgs), **kw))
            self._psf_ids[key] = info.id
        return self._psf_ids[key]

    def _psf_id_or_error(self, server_path):
        try:
            return self.load_psf(server_path=server_path).id
        except SpexdError as e:
            return e

    # ------------------------------------------------------------------ exposures
    def iter_exposure(self, frames, **kwargs):
        """An ExposureStream: the FrameResult of each frame as it finishes.

        frames: dicts with server_path, server_output_path, psf_server_path (or psf_id),
        optional fibermap_path, client_tag and per-frame extraction parameters.
        Keywords: priority, overwrite, client_tag, server_checksum and extraction
        parameters for every frame (as extract's). One deadline (extract_deadline) for
        the whole exposure.
        """
        return ExposureStream(self, ExposureSpec(frames, **kwargs))

    def extract_exposure(self, frames, **kwargs):
        """Runs a whole exposure (iter_exposure's arguments): an ExposureResult with
        every frame's FrameResult in frame order. Frame failures do not raise (see
        ``failed``); a refused or stopped call raises its SpexdError."""
        stream = self.iter_exposure(frames, **kwargs)
        results = sorted(stream, key=lambda r: r.index)
        return ExposureResult(results, stream.total_seconds)

    # ------------------------------------------------------------------ extraction
    def iter_bundles(self, **kwargs):
        """A BundleStream over the bundles of one extraction (same arguments as extract)."""
        return BundleStream(self, ExtractSpec(**kwargs))

    def extract(self, **kwargs):
        """Extracts a frame (or the bundles/fibers asked for) and returns an
        ExtractionResult.

        Input image: ``image=`` numpy array (with ``ivar=``, optional ``mask=``,
        ``fibermap=``, ``header=``) or a local preproc file path, uploaded in chunks; or
        ``server_path=`` a preproc file on the server. PSF: ``psf=`` local file
        (uploaded once per client), ``psf_server_path=`` or ``psf_id=``.
        Parameters: wavelength=(wmin, wmax, dw), specmin, nspec, bundlesize,
        nsubbundles, nwavestep, wavepad, wavepad_frac, pixpad_frac, regularize, psferr,
        reproduce ("gpu_specter_gpu"/"gpu_specter_cpu": which gpu_specter path's results,
        extraction-spec §2.17; compat="gpu"/"cpu" is its deprecated spelling),
        mask_policy ("desispec"/"desispec-exact"/"any"), barycentric_correction, no_scores,
        fibermap_path (desi_extract_spectra -f); flavor, camera (FLAVOR/CAMERA for an
        uploaded array's header); priority ("realtime"/
        "reprocessing"), want_model, server_output_path (also written by the server;
        server_model_path, server_overwrite), bundles / fibers (a subset), client_tag;
        wire_precision ("float64", default: arrays equal to a local run's to the bit;
        "float32": half the stream, arrays rounded as the frame file holds them, and
        mask/scores computed by the server from the float64 values, so result.write
        gives the same file); server_checksum ("sha256", the default, or "crc32": the
        checksum the summary gives of each server-written file, in
        server_output_sha256 or server_output_crc32, 8 hex digits as
        ``format(zlib.crc32(data), "08x")``; CRC-32 costs the server ~8x less).
        Errors raise spexd.SpexdError subclasses (gRPC status +
        message).
        """
        spec = ExtractSpec(**kwargs)
        stream = BundleStream(self, spec)
        return result_of(spec, stream, list(stream))

    def extract_to_server(self, server_output_path, server_model_path=None,
                          server_overwrite=False, **kwargs):
        """The server writes the frame (and the model file, desispec's, when
        ``server_model_path`` is given) atomically into its output roots; no array is
        streamed. Returns the ExtractSummary: server_output_path, server_output_bytes,
        server_output_sha256, or server_output_crc32 with server_checksum="crc32" (and
        server_model_*). Same other arguments as extract.
        PermissionDenied outside the server's output roots. Without ``server_overwrite``
        a file already at a name is kept when it is the frame this request writes (the
        checksum dates aside: a retry gets the first reply's path, size and SHA-256),
        else AlreadyExists. UNAVAILABLE is retried until the summary arrives."""
        stream = BundleStream(self, file_only_spec(server_output_path, server_model_path,
                                                   server_overwrite, kwargs))
        for _ in stream:
            pass
        return stream.summary
