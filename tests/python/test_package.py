"""Package-level checks that need no server: version, errors, desispec, health rules."""
import os
import re
import unittest

import grpc
import numpy as np

import spexd
from spexd import qa
from spexd.result import spec_mask


class PackageTest(unittest.TestCase):
    def test_version_matches_the_cpp_one(self):
        src = os.environ.get("SPEXD_SOURCE_DIR", "")
        with open(os.path.join(src, "core", "version.h")) as f:
            cpp = re.search(r'kSpexdVersion = "([^"]+)"', f.read()).group(1)
        self.assertEqual(spexd.__version__, cpp)

    def test_errors_carry_code_and_message(self):
        class FakeRpcError(grpc.RpcError):
            def code(self):
                return grpc.StatusCode.RESOURCE_EXHAUSTED

            def details(self):
                return "queue full"

        err = spexd.errors.from_rpc_error(FakeRpcError())
        self.assertIsInstance(err, spexd.ResourceExhausted)
        self.assertEqual(err.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(err.details, "queue full")
        self.assertIn("queue full", str(err))

    def test_to_desispec_says_when_desispec_is_missing(self):
        try:
            import desispec  # noqa: F401
        except ImportError:
            pass
        else:
            self.skipTest("desispec is installed: to_desispec is exercised for real")
        r = spexd.ExtractionResult.__new__(spexd.ExtractionResult)
        with self.assertRaises(spexd.DesispecUnavailable) as e:
            r.to_desispec()
        self.assertIn("not packaged in Debian", str(e.exception))
        self.assertIn("result.write", str(e.exception))

    def test_spec_mask_bits(self):
        chi2 = np.ones((3, 4))
        chi2[1, 2] = 100.0  # far above both medians
        pf = np.zeros((3, 4))
        pf[0, 0] = 0.6
        pf[2, 3] = 1.0
        failed = np.zeros((3, 4), bool)
        failed[2, 0] = True
        m = spec_mask(chi2, pf, failed)
        self.assertEqual(m.dtype, np.uint32)
        self.assertEqual(m[0, 0], 1)        # SOMEBADPIX
        self.assertEqual(m[2, 3], 1 | 2)    # SOMEBADPIX | ALLBADPIX
        self.assertEqual(m[1, 2], 128)      # BAD2DFIT
        self.assertEqual(m[2, 0], 128)      # failed patch
        self.assertEqual(np.count_nonzero(m), 4)

    def test_health_flags_a_bad_frame(self):
        frame = {"flux": np.ones((4, 10)), "ivar": np.ones((4, 10)),
                 "mask": np.zeros((4, 10), np.uint32), "chi2pix": np.ones((4, 10))}
        self.assertEqual(qa.health(frame)[0], "OK")
        frame["ivar"][2] = 0  # a dead fibre
        verdict, problems, _ = qa.health(frame)
        self.assertEqual(verdict, "CHECK")
        self.assertIn("1 fibres without a valid bin", problems)


if __name__ == "__main__":
    unittest.main()
