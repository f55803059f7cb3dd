"""Round-robin: one client, a two-address target, calls spread over both servers."""
import unittest

import spexd
import support


class BalanceTest(unittest.TestCase):
    def test_calls_alternate_over_two_servers(self):
        a, b = support.Server(), support.Server()
        label = dict(code="OK", rpc="GetServerInfo")
        with spexd.Client(f"ipv4:127.0.0.1:{a.port},127.0.0.1:{b.port}") as c:
            # round_robin uses connected subchannels; the second may take a moment.
            for _ in range(200):
                c.server_info()
                if a.metric("spexd_requests_total", **label) >= 3 and \
                        b.metric("spexd_requests_total", **label) >= 3:
                    break
            before = (a.metric("spexd_requests_total", **label),
                      b.metric("spexd_requests_total", **label))
            self.assertGreaterEqual(min(before), 3)
            for _ in range(10):
                c.server_info()
            after = (a.metric("spexd_requests_total", **label),
                     b.metric("spexd_requests_total", **label))
        self.assertEqual((after[0] - before[0], after[1] - before[1]), (5, 5))


if __name__ == "__main__":
    unittest.main()
