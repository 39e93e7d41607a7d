"""Unit tests of tessbench.realprogs' numbers (no redis needed)."""

from __future__ import annotations

import unittest

from tessbench import realprogs


class CombinedRateTest(unittest.TestCase):
    def test_requests_per_second_over_all_the_tests(self) -> None:
        # 1000 requests each: 10 s at 100/s and 1 s at 1000/s are 2000 requests
        # in 11 s, 181.8/s (the arithmetic mean of the rates says 550/s)
        self.assertAlmostEqual(realprogs.combined_rate({"get": 100.0, "set": 1000.0}),
                               2000 / 11)
        self.assertAlmostEqual(realprogs.combined_rate({"get": 250.0}), 250.0)

    def test_no_rate_is_an_error(self) -> None:
        for rates in ({}, {"get": 0.0}, {"get": 100.0, "set": -1.0}):
            with self.assertRaises(ValueError):
                realprogs.combined_rate(rates)

    def test_parsed_output(self) -> None:
        text = ('"test","rps","avg_latency_ms"\n"SET","66137.60","0.4"\n'
                '"LPUSH (needed to benchmark LPOP)","55432.40","0.5"\n')
        rates = realprogs.parse_benchmark_csv(text)
        self.assertEqual(rates, {"set": 66137.6, "lpush": 55432.4})
        self.assertAlmostEqual(realprogs.combined_rate(rates),
                               2 / (1 / 66137.6 + 1 / 55432.4))


if __name__ == "__main__":
    unittest.main()
