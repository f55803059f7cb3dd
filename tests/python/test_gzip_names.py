"""spexd.frame_file.is_gzip_name against the table core::IsGzipName is tested with too
(tests/data/gzip_names.tsv): the server, spexctl and this client store a frame file named
alike the same way."""
import gzip
import os
import tempfile
import unittest

from spexd import frame_file

TABLE = os.path.join(os.environ.get("SPEXD_SOURCE_DIR", ""), "tests", "data", "gzip_names.tsv")


def rows():
    with open(TABLE, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if not line or line.startswith("#"):
                continue
            name, _, expected = line.rpartition("\t")
            yield name, expected


class GzipNames(unittest.TestCase):
    def test_follows_the_shared_table(self):
        table = list(rows())
        self.assertGreaterEqual(len(table), 10)
        self.assertEqual({e for _, e in table}, {"gzip", "plain"})
        for name, expected in table:
            with self.subTest(name=name):
                self.assertEqual(frame_file.is_gzip_name(name), expected == "gzip")

    def test_the_writer_compresses_by_the_rule(self):
        # What _write_atomically stores for a name: gzip bytes exactly when the rule says.
        from astropy.io import fits
        import numpy as np

        hdul = fits.HDUList([fits.PrimaryHDU(np.zeros((2, 2), dtype=np.float32))])
        with tempfile.TemporaryDirectory() as d:
            for name in ("f.fits.gz", "f.fits", "f.fits.GZ"):
                path = os.path.join(d, name)
                frame_file._write_atomically(path, frame_file._encode(hdul, path))
                with open(path, "rb") as f:
                    head = f.read(2)
                self.assertEqual(head == b"\x1f\x8b", frame_file.is_gzip_name(name), name)
                if frame_file.is_gzip_name(name):
                    with gzip.open(path) as f:
                        self.assertTrue(f.read(6) == b"SIMPLE")


if __name__ == "__main__":
    unittest.main()
