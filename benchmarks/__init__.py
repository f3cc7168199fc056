"""``make bench``: placements/s, latency, host reports/s and memory, against the baselines.

Run it with ``actorsched bench`` (or ``python -m benchmarks.run``); see
:mod:`benchmarks.run` for the options.
"""
