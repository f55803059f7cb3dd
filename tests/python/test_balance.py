"""Round-robin: one client, a two-address target, calls spread over both servers.
Bursts: more clients than queue slots all finish, retrying "queue full"."""
import threading
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


class QueueFullTest(unittest.TestCase):
    def test_a_burst_past_a_queue_of_one_all_finishes(self):
        inputs = support.inputs()
        server = support.Server("--max_queue=1", "--realtime_reserve=0")
        results, errors = [], []

        def extract():
            try:
                with spexd.Client(server.target, retries=4) as c:
                    results.append(c.extract(server_path=inputs["preproc"],
                                             psf_server_path=inputs["psf"],
                                             wavelength=support.WAVELENGTH, specmin=0,
                                             nspec=support.NSPEC))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=extract) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 4)
        # One running, one queued: the others were refused at least once and retried
        # (more than the 4 attempts UNAVAILABLE gets would be allowed too).
        refused = server.metric("spexd_requests_total", code="RESOURCE_EXHAUSTED",
                                rpc="ExtractFrame")
        self.assertGreaterEqual(refused, 1)
        for r in results[1:]:
            self.assertEqual(r.flux.tobytes(), results[0].flux.tobytes())
        server.stop()


if __name__ == "__main__":
    unittest.main()
