"""Ops along an axis: aether's sort, argsort, cumsum and topk (the Argsort and Cumsum primitives, and a
Gather for the values) against NumPy's np.sort, np.argsort(kind="stable"), np.cumsum and a stable
argsort's first k, on the same array, alternating in one process.

    python3 -m venv v && v/bin/pip install .
    v/bin/python bench/sort_vs_numpy.py --rows 4096 --cols 1000 --rounds 3

Each round reports the median of --reps calls of each; every result is checked against NumPy's first.
"""

import argparse

import numpy as np

import aether as ae
from timing import median_seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=1000)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    a = np.random.default_rng(0).standard_normal((args.rows, args.cols)).astype(np.float32)
    t = ae.tensor(a)
    k = args.k
    ops = {  # name: (aether, NumPy)
        "sort": (lambda: t.sort(1), lambda: np.sort(a, 1, kind="stable")),
        "argsort": (lambda: t.argsort(1), lambda: np.argsort(a, 1, kind="stable")),
        "cumsum": (lambda: t.cumsum(1), lambda: np.cumsum(a, 1)),
        f"topk {k}": (lambda: t.topk(k, 1)[1], lambda: np.argsort(-a, 1, kind="stable")[:, :k]),
    }
    for name, (mine, theirs) in ops.items():
        np.testing.assert_allclose(np.asarray(mine()), theirs(), rtol=1e-4, atol=1e-3, err_msg=name)
    for r in range(args.rounds):
        cells = []
        for name, (mine, theirs) in ops.items():
            n = median_seconds(theirs, args.reps)
            e = median_seconds(lambda: mine().realize(), args.reps)
            cells.append(f"{name} {e * 1e3:.1f} vs {n * 1e3:.1f} ms ({e / n:.2f}x)")
        print(f"round {r + 1}: aether vs numpy: " + "; ".join(cells))


if __name__ == "__main__":
    main()
