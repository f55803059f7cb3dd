"""The asyncio (grpc.aio) spexd client: same arguments and results as spexd.Client.

    async with spexd.aio.Client("host:port") as client:
        result = await client.extract(server_path=..., psf_server_path=..., nspec=500)
        async for bundle in client.iter_bundles(...):   # as each bundle is done
            ...
"""
import asyncio

import grpc

from spexd import _channel, request
from spexd.client import ExtractSpec, psf_load_requests
from spexd.result import ExtractionResult, StreamAssembler
from spexd.v1 import spexd_pb2 as pb
from spexd.v1 import spexd_pb2_grpc as pb_grpc


class BundleStream:
    """Async iterator over the Bundles of one extraction; header, summary and model
    as on spexd.client.BundleStream."""

    def __init__(self, client, spec):
        self._client = client
        self._spec = spec
        self.header = None
        self.summary = None
        self.model = None

    def __aiter__(self):
        return self._bundles()

    async def _bundles(self):
        spec, c = self._spec, self._client
        psf_id = await c._psf_id(spec)
        reloaded = False
        retrier = _channel.Retrier(c.policy)
        while True:
            asm = StreamAssembler()
            call = None
            try:
                rpc = c._extraction.ExtractBundles if spec.subset else c._extraction.ExtractFrame
                call = rpc(request.request_messages(spec.header(psf_id), spec.upload),
                           timeout=c.policy.extract_deadline, metadata=c._metadata)
                async for resp in call:
                    bundle = asm.feed(resp)
                    self.header = asm.header
                    if bundle is not None:
                        yield bundle
                self.summary = asm.summary
                self.model = asm.finish()
                return
            except grpc.RpcError as e:
                action = _channel.after_stream_error(e, asm.header is not None, reloaded,
                                                     spec.psf_id is None, retrier)
                if action == _channel.RELOAD_PSF:
                    reloaded = True
                    psf_id = await c._psf_id(spec, reload=True)
                    continue
                await asyncio.sleep(action)
            finally:
                if call is not None and self.summary is None:
                    call.cancel()


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

    async def extract(self, **kwargs):
        spec = ExtractSpec(**kwargs)
        stream = BundleStream(self, spec)
        bundles = [b async for b in stream]
        return ExtractionResult(stream.header, bundles, stream.summary, stream.model,
                                spec.in_psf, spec.in_img, exact_allbadpix=spec.exact_allbadpix,
                                want_scores=spec.want_scores)
