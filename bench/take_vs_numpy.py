"""Indexing by integer arrays: aether's `t[perm]` (the Gather primitive) against NumPy's `a[perm]` on
the same array, alternating in one process, and take's backward (ScatterAdd) timed alone.

    python3 -m venv v && v/bin/pip install .
    v/bin/python bench/take_vs_numpy.py --rows 60000 --cols 784 --rounds 3

Each round reports the median of --reps calls of each; the result is checked against NumPy's.
"""

import argparse

import numpy as np

import aether as ae
from timing import median_seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=60000)
    p.add_argument("--cols", type=int, default=784)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    perm = rng.permutation(args.rows)
    t, idx = ae.tensor(a), ae.tensor(perm)
    np.testing.assert_array_equal(np.asarray(t[idx]), a[perm])
    mb = 2 * a.nbytes / 1e6  # read and written
    for r in range(args.rounds):
        n = median_seconds(lambda: a[perm], args.reps)
        e = median_seconds(lambda: t[idx].realize(), args.reps)
        print(f"round {r + 1}: numpy {n * 1e3:.1f} ms ({mb / 1e3 / n:.1f} GB/s), aether {e * 1e3:.1f} ms "
              f"({mb / 1e3 / e:.1f} GB/s), aether/numpy {e / n:.2f}")
    x = ae.tensor(a, requires_grad=True)

    def backward():
        x.zero_grad()
        x[idx].sum().backward()
        x.grad.realize()

    print(f"t[perm].sum().backward() (gather + scatter-add): {median_seconds(backward, args.reps) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
