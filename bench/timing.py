"""Timing for the Python benchmarks in this folder (run as `python bench/<name>.py`, so they import it)."""

import statistics
import time


def median_seconds(f, reps):
    """The median wall-clock time of `reps` calls of f()."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
