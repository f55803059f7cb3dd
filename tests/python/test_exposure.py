"""Exposures from Python (ExtractExposure): sync and asyncio clients.

Every frame file the server writes for an exposure must be byte for byte the file it
writes for the same frame through extract(server_output_path=...); a bad entry fails
alone, a PSF that does not load fails its frame client-side.
"""
import asyncio
import gzip
import os
import shutil
import unittest

import grpc

import spexd
import support

PARAMS = dict(wavelength=support.WAVELENGTH, specmin=0, nspec=support.NSPEC)


def setUpModule():
    global SERVER, IN, PSF2
    IN = support.inputs()
    SERVER = support.Server()
    PSF2 = os.path.join(support.work_dir(), "psf-copy.fits")
    shutil.copy(IN["psf"], PSF2)


def out(name):
    path = os.path.join(support.work_dir(), name)
    if os.path.exists(path):
        os.remove(path)
    return path


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def assert_same_frame_file(test, a_path, b_path):
    """Record by record; only CHECKSUM/DATASUM may differ (CFITSIO writes the time into
    their comments)."""
    a, b = read(a_path), read(b_path)
    test.assertGreater(len(a), 2880)
    test.assertEqual(len(a), len(b))
    for off in range(0, len(a), 80):
        ra, rb = a[off:off + 80], b[off:off + 80]
        if ra != rb:
            test.assertIn(ra[:8], (b"CHECKSUM", b"DATASUM "), (off, ra, rb))
            test.assertEqual(ra[:8], rb[:8])


class ExposureTest(unittest.TestCase):
    def frames(self, prefix):
        return [
            dict(server_path=IN["preproc"], psf_server_path=IN["psf"],
                 server_output_path=out(f"{prefix}-a.fits")),
            dict(server_path=IN["preproc"], psf_server_path=PSF2,
                 server_output_path=out(f"{prefix}-b.fits.gz")),
            dict(server_path=os.path.join(support.work_dir(), "missing.fits"),
                 psf_server_path=IN["psf"], server_output_path=out(f"{prefix}-c.fits")),
            dict(server_path=IN["preproc"],
                 psf_server_path=os.path.join(support.work_dir(), "no-psf.fits"),
                 server_output_path=out(f"{prefix}-d.fits")),
        ]

    def check(self, frames, result, seen):
        self.assertEqual(sorted(r.index for r in seen), [0, 1, 2, 3])
        self.assertEqual([r.index for r in result.frames], [0, 1, 2, 3])
        a, b, c, d = result.frames
        self.assertTrue(a.ok and b.ok, (a, b))
        self.assertEqual(c.code, grpc.StatusCode.NOT_FOUND)
        self.assertIsInstance(c.error(), spexd.NotFound)
        self.assertIn("no-psf.fits", d.message)  # failed client-side, not sent
        self.assertFalse(d.ok)
        self.assertEqual([r.index for r in result.failed], [2, 3])
        self.assertEqual(a.summary.server_output_path, frames[0]["server_output_path"])
        with spexd.Client(SERVER.target) as cl:
            for f in frames[:2]:
                single = out("single-" + os.path.basename(f["server_output_path"]))
                cl.extract(server_path=f["server_path"], psf_server_path=f["psf_server_path"],
                           server_output_path=single, **PARAMS)
                assert_same_frame_file(self, single, f["server_output_path"])

    def test_sync_exposure_equals_single_frames(self):
        frames = self.frames("sync")
        with spexd.Client(SERVER.target) as c:
            seen = list(c.iter_exposure(frames, **PARAMS))
            for f in frames:
                if os.path.exists(f["server_output_path"]):
                    os.remove(f["server_output_path"])
            result = c.extract_exposure(frames, **PARAMS)
        self.assertIsNotNone(result.total_seconds)
        self.check(frames, result, seen)

    def test_async_exposure_equals_single_frames(self):
        frames = self.frames("aio")

        async def go():
            async with spexd.aio.Client(SERVER.target) as c:
                seen = [r async for r in c.iter_exposure(frames, **PARAMS)]
                for f in frames:
                    if os.path.exists(f["server_output_path"]):
                        os.remove(f["server_output_path"])
                return seen, await c.extract_exposure(frames, **PARAMS)

        seen, result = asyncio.run(go())
        self.check(frames, result, seen)

    def test_existing_output_needs_overwrite_and_bad_requests_raise(self):
        path = out("exists.fits")
        with open(path, "w") as f:
            f.write("x")
        frame = dict(server_path=IN["preproc"], psf_server_path=IN["psf"],
                     server_output_path=path)
        with spexd.Client(SERVER.target) as c:
            r = c.extract_exposure([frame], **PARAMS)
            self.assertEqual(r.frames[0].code, grpc.StatusCode.ALREADY_EXISTS)
            r = c.extract_exposure([frame], overwrite=True, **PARAMS)
            self.assertTrue(r.frames[0].ok, r.frames[0])
            with self.assertRaises(spexd.InvalidArgument):  # the same output twice
                c.extract_exposure([frame, frame], overwrite=True, **PARAMS)
            with self.assertRaises(ValueError):
                c.extract_exposure([dict(server_path=IN["preproc"])])

    def test_frames_from_list(self):
        path = os.path.join(support.work_dir(), "frames.txt")
        with open(path, "w") as f:
            f.write(f"# preproc psf output\n\n{IN['preproc']} {IN['psf']} {out('l.fits')}\n")
        frames = spexd.frames_from_list(path)
        self.assertEqual(frames[0]["psf_server_path"], IN["psf"])
        with open(path, "w") as f:
            f.write("a.fits psf.fits\n")
        with self.assertRaisesRegex(ValueError, "frames.txt:1"):
            spexd.frames_from_list(path)


if __name__ == "__main__":
    unittest.main()
