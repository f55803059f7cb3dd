"""From Python: float32 arrays on the wire give the same frame file as float64
ones, server-written frames (extract_to_server, sync and aio) are the frame spexctl
writes, with the path, size and SHA-256 in the summary, and their refusals.

Files are compared record by record (80 bytes); only the CHECKSUM and DATASUM cards may
differ, since their comments carry the time of writing.
"""
import asyncio
import gzip
import hashlib
import os
import shutil
import time
import unittest
import zlib

import numpy as np

import spexd
import support

PARAMS = dict(wavelength=support.WAVELENGTH, specmin=0, nspec=support.NSPEC)
# One bundle on a quarter of the grid, where no local reference is needed: quicker.
SMALL = dict(wavelength=(5760.0, 5880.0, 0.8), specmin=0, nspec=25)


def setUpModule():
    global SERVER, IN
    IN = support.inputs()
    SERVER = support.Server()
    # The .fits.gz inputs DESI ships, in the same data root.
    for key in ("preproc", "psf"):
        with open(IN[key], "rb") as f, open(IN[key] + ".gz", "wb") as out:
            out.write(gzip.compress(f.read(), mtime=0))


def fits_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


class FitsCompare(unittest.TestCase):
    def assertSameFits(self, a_path, b_path):
        a, b = fits_bytes(a_path), fits_bytes(b_path)
        self.assertEqual(len(a), len(b), (a_path, b_path))
        for off in range(0, len(a), 80):
            ra, rb = a[off:off + 80], b[off:off + 80]
            if ra != rb:
                self.assertIn(ra[:8], (b"CHECKSUM", b"DATASUM "), (off, ra, rb))
                self.assertEqual(ra[:8], rb[:8])


class Float32WireTest(FitsCompare):
    def test_float32_result_writes_the_float64_file(self):
        d = support.work_dir()
        for suffix in ("", ".gz"):
            with self.subTest(input="preproc.fits" + suffix):
                kw = dict(server_path=IN["preproc"] + suffix,
                          psf_server_path=IN["psf"] + suffix, want_model=True, **SMALL)
                with spexd.Client(SERVER.target) as c:
                    r64 = c.extract(**kw)
                    r32 = c.extract(wire_precision="float32", **kw)
                self.assertEqual(r64.flux.dtype, np.float64)
                self.assertEqual(r32.flux.dtype, np.float32)
                self.assertIsNone(r32.pixmask_fraction)
                np.testing.assert_array_equal(r32.flux, r64.flux.astype(np.float32))
                np.testing.assert_array_equal(r32.mask, r64.mask)
                np.testing.assert_array_equal(r32.model, r64.model)
                s64, c64 = r64.scores
                s32, c32 = r32.scores
                self.assertEqual(c32, c64)
                for k in s64:
                    np.testing.assert_array_equal(s32[k], s64[k], k)
                paths = {}
                for name, r in (("f64", r64), ("f32", r32)):
                    paths[name] = os.path.join(d, f"wire-{name}{suffix}.fits")
                    r.write(paths[name], model_path=paths[name] + "-model.fits")
                self.assertSameFits(paths["f64"], paths["f32"])
                self.assertSameFits(paths["f64"] + "-model.fits", paths["f32"] + "-model.fits")

    def test_bad_wire_precision(self):
        with spexd.Client(SERVER.target) as c:
            with self.assertRaises(ValueError):
                c.extract(server_path=IN["preproc"], psf_server_path=IN["psf"],
                          wire_precision="float16", **SMALL)


class ServerWrittenTest(FitsCompare):
    def check_summary(self, s, path, model=None):
        for p, size, sha in ((path, s.server_output_bytes, s.server_output_sha256),
                             (model, s.server_model_bytes, s.server_model_sha256)):
            if p is None:
                continue
            with open(p, "rb") as f:
                data = f.read()
            self.assertEqual(size, len(data))
            self.assertEqual(sha, hashlib.sha256(data).hexdigest())
        self.assertEqual(s.server_output_path, path)

    def test_server_written_frame_and_model_equal_spexctl_local(self):
        d = support.work_dir()
        out, model = os.path.join(d, "srv-frame.fits"), os.path.join(d, "srv-model.fits")
        with spexd.Client(SERVER.target) as c:
            s = c.extract_to_server(out, server_model_path=model, server_path=IN["preproc"],
                                    psf_server_path=IN["psf"], **PARAMS)
        self.check_summary(s, out, model)
        self.assertEqual(s.server_model_path, model)
        self.assertEqual(s.nfibers, support.NSPEC)
        # spexctl --local wrote the reference with the same input names.
        self.assertSameFits(IN["local"], out)
        self.assertSameFits(IN["model"], model)

    def test_async_gz_output_and_overwrite_retry(self):
        d = support.work_dir()
        out = os.path.join(d, "srv-aio.fits.gz")
        kw = dict(server_path=IN["preproc"], psf_server_path=IN["psf"], **SMALL)

        async def run(overwrite):
            async with spexd.aio.Client(SERVER.target) as c:
                return await c.extract_to_server(out, server_overwrite=overwrite, **kw)

        s = asyncio.run(run(False))
        self.check_summary(s, out)
        first = os.path.join(d, "srv-aio-first.fits.gz")
        shutil.copy(out, first)
        st = os.stat(out)
        time.sleep(1.05)  # another second in the checksum dates of what the retry writes
        # The same request again (a retry whose first reply was lost): the file is kept
        # and named with the first reply's size and SHA-256.
        again = asyncio.run(run(False))
        self.assertEqual((again.server_output_path, again.server_output_bytes,
                          again.server_output_sha256),
                         (s.server_output_path, s.server_output_bytes, s.server_output_sha256))
        self.assertEqual((os.stat(out).st_ino, os.stat(out).st_mtime_ns), (st.st_ino, st.st_mtime_ns))
        # Another request onto it is refused.
        with self.assertRaises(spexd.AlreadyExists):
            async def other():
                async with spexd.aio.Client(SERVER.target) as c:
                    return await c.extract_to_server(out, no_scores=True, **kw)
            asyncio.run(other())
        s2 = asyncio.run(run(True))
        self.check_summary(s2, out)  # (the gzip size may differ: CHECKSUM comments hold a time)
        self.assertSameFits(first, out)

    def test_crc32_checksum(self):
        """server_checksum="crc32": the summary's CRC-32 of each file, zlib.crc32's
        (no SHA-256), for the sync client and an exposure; a bad name is a ValueError."""
        d = support.work_dir()
        out, model = os.path.join(d, "srv-crc.fits.gz"), os.path.join(d, "srv-crc-model.fits")
        kw = dict(server_path=IN["preproc"], psf_server_path=IN["psf"], **SMALL)
        with spexd.Client(SERVER.target) as c:
            s = c.extract_to_server(out, server_model_path=model, server_checksum="crc32", **kw)
            for p, crc in ((out, s.server_output_crc32), (model, s.server_model_crc32)):
                with open(p, "rb") as f:
                    self.assertEqual(crc, format(zlib.crc32(f.read()), "08x"))
            self.assertEqual((s.server_output_sha256, s.server_model_sha256), ("", ""))
            exp_out = os.path.join(d, "srv-crc-exposure.fits")
            r = c.extract_exposure([dict(server_path=IN["preproc"], server_output_path=exp_out,
                                         psf_server_path=IN["psf"])],
                                   server_checksum="crc32", **SMALL)
            self.assertEqual(r.failed, [])
            with open(exp_out, "rb") as f:
                self.assertEqual(r.frames[0].summary.server_output_crc32,
                                 format(zlib.crc32(f.read()), "08x"))
            with self.assertRaises(ValueError):
                c.extract_to_server(os.path.join(d, "srv-md5.fits"), server_checksum="md5", **kw)

    def test_refusals(self):
        d = support.work_dir()
        kw = dict(server_path=IN["preproc"], psf_server_path=IN["psf"], **SMALL)
        with spexd.Client(SERVER.target) as c:
            with self.assertRaises(spexd.PermissionDenied):
                c.extract_to_server("/etc/spexd-wire.fits", **kw)
            with self.assertRaises(spexd.PermissionDenied):
                c.extract_to_server(os.path.join(d, "refused.fits"),
                                    server_model_path="/etc/spexd-model.fits", **kw)
            self.assertFalse(os.path.exists(os.path.join(d, "refused.fits")))
            with self.assertRaises(spexd.AlreadyExists):
                c.extract_to_server(IN["local"], **kw)  # an existing file, no overwrite
            with self.assertRaises(spexd.InvalidArgument):
                same = os.path.join(d, "same.fits")
                c.extract_to_server(same, server_model_path=same, **kw)
            with self.assertRaises(ValueError):
                c.extract(results_to_file_only=True, **kw)


if __name__ == "__main__":
    unittest.main()
