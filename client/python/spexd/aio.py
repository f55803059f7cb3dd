"""The asyncio (grpc.aio) spexd client: same arguments and results as spexd.Client.

    async with spexd.aio.Client("host:port") as client:
        result = await client.extract(server_path=..., psf_server_path=..., nspec=500)
        async for bundle in client.iter_bundles(...):   # as each bundle is done
            ...
"""
import asyncio

import grpc

from spexd import _channel, request
from spexd.client import (ExposureState, ExtractSpec, StreamState, file_only_spec,
                          psf_load_requests, result_of)
from spexd.errors import SpexdError
from spexd.exposure import ExposureResult, ExposureSpec
from spexd.v1 import spexd_pb2 as pb
from spexd.v1 import spexd_pb2_grpc as pb_grpc


class BundleStream(StreamState):
    """Async iterator over the Bundles of one extraction; header, summary and model
    as on spexd.client.BundleStream."""

    def __aiter__(self):
        return self._bundles()

    async def _bundles(self):
        psf_id = await self._client._psf_id(self._spec)
        while True:
            try:
                async for resp in self._open(psf_id):
                    if (bundle := self._feed(resp)) is not None:
                        yield bundle
                self._end()
                return
            except grpc.RpcError as e:
                psf_id = await self._recover(e, psf_id)
            finally:
                self._stop()

    async def _recover(self, rpc_error, psf_id):
        action = self._after_error(rpc_error)
        if action == _channel.RELOAD_PSF:
            return await self._client._psf_id(self._spec, reload=True)
        await asyncio.sleep(action)
        return psf_id


class ExposureStream(ExposureState):
    """Async iterator over the FrameResults of one exposure; as
    spexd.client.ExposureStream."""

    def __aiter__(self):
        return self._frames()

    async def _frames(self):
        c, spec = self._client, self._spec
        paths = spec.psf_paths()
        ids = dict(zip(paths, await asyncio.gather(*(c._psf_id_or_error(p) for p in paths))))
        req, entries, refused = spec.request(ids)
        for r in refused:
            yield r
        if not entries:
            return
        while True:
            try:
                async for resp in self._open(req):
                    if (result := self._feed(resp, entries)) is not None:
                        yield result
                self._ended = True
                return
            except grpc.RpcError as e:
                await asyncio.sleep(self._pause_after(e))
            finally:
                self._stop()


class Client:
    """grpc.aio twin of spexd.Client (same constructor arguments)."""

    def __init__(self, server=None, tls=False, auth_token=None, retries=4, deadline=60.0,
                 extract_deadline=None, queue_wait=600.0, target=None, token=None):
        conn = _channel.connect(server, tls, auth_token, retries, deadline, extract_deadline,
                                queue_wait, target, token)
        self.target, self.policy, self._metadata = conn.target, conn.policy, conn.metadata
        self._channel = conn.open(grpc.aio)
        self._extraction = pb_grpc.ExtractionStub(self._channel)
        self._admin = pb_grpc.AdminStub(self._channel)
        self._psf_ids = {}

    async def close(self):
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _call(self, fn, *args):
        retrier = _channel.Retrier(self.policy)
        while True:
            try:
                return await fn(*args, timeout=self.policy.deadline, metadata=self._metadata)
            except grpc.RpcError as e:
                await asyncio.sleep(retrier.pause_or_raise(e))

    async def load_psf(self, path=None, server_path=None):
        msgs = psf_load_requests(path, server_path)
        return await self._call(lambda **kw: self._admin.LoadPsf(iter(msgs), **kw))

    async def list_psfs(self):
        return await self._call(self._admin.ListPsfs, pb.ListPsfsRequest())

    async def unload_psf(self, psf_id):
        return await self._call(self._admin.UnloadPsf, pb.UnloadPsfRequest(id=psf_id))

    async def server_info(self):
        return await self._call(self._admin.GetServerInfo, pb.GetServerInfoRequest())

    async def _psf_id(self, spec, reload=False):
        if spec.psf_id is not None:
            return spec.psf_id
        key = spec.psf_cache_key()
        if reload or key not in self._psf_ids:
            msgs = spec.psf_requests()
            info = await self._call(lambda **kw: self._admin.LoadPsf(iter(msgs), **kw))
            self._psf_ids[key] = info.id
        return self._psf_ids[key]

    def iter_bundles(self, **kwargs):
        return BundleStream(self, ExtractSpec(**kwargs))

    async def _psf_id_or_error(self, server_path):
        try:
            return (await self.load_psf(server_path=server_path)).id
        except SpexdError as e:
            return e

    def iter_exposure(self, frames, **kwargs):
        """As spexd.Client.iter_exposure, an async iterator."""
        return ExposureStream(self, ExposureSpec(frames, **kwargs))

    async def extract_exposure(self, frames, **kwargs):
        stream = self.iter_exposure(frames, **kwargs)
        results = sorted([r async for r in stream], key=lambda r: r.index)
        return ExposureResult(results, stream.total_seconds)

    async def extract(self, **kwargs):
        spec = ExtractSpec(**kwargs)
        stream = BundleStream(self, spec)
        return result_of(spec, stream, [b async for b in stream])

    async def extract_to_server(self, server_output_path, server_model_path=None,
                                server_overwrite=False, **kwargs):
        """As spexd.Client.extract_to_server: the server writes the files; the summary."""
        stream = BundleStream(self, file_only_spec(server_output_path, server_model_path,
                                                   server_overwrite, kwargs))
        async for _ in stream:
            pass
        return stream.summary
