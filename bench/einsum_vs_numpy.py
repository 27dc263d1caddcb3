"""einsum: aether's (matmul, broadcast products and fused sums) against NumPy's np.einsum with
optimize=True (its BLAS path where one exists) and against the equivalent hand-written aether
expression, on the same float32 arrays, alternating in one process.

    python3 -m venv v && v/bin/pip install .
    v/bin/python bench/einsum_vs_numpy.py --rounds 3

Each round reports the median of --reps calls of each; every result is checked against NumPy's first.
Each timing starts after a --pause (0.5 s): NumPy's BLAS threads and aether's OpenMP threads spin for
a while after their work, and on 2 cores whichever runs next measured the other's spinning (aether's
batched matmul read 2.7 ms alone and 6.6 ms right after NumPy's).
"""

import argparse
import time

import numpy as np

import aether as ae
from timing import median_seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--pause", type=float, default=0.5)
    args = p.parse_args()
    rng = np.random.default_rng(0)

    def timed(f):
        time.sleep(args.pause)
        return median_seconds(f, args.reps)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    a, b = arr(512, 512), arr(512, 512)
    q, k = arr(8, 8, 256, 64), arr(8, 8, 256, 64)
    x, y = arr(4096, 256), arr(4096, 256)
    m = arr(64, 64, 64)
    cases = {  # name: (subscripts, arrays, the same in aether's other ops)
        "ij,jk->ik 512": ("ij,jk->ik", (a, b), lambda A, B: A @ B),
        "bhqd,bhkd->bhqk": ("bhqd,bhkd->bhqk", (q, k), lambda Q, K: Q @ K.mT),
        "bi,bi->b": ("bi,bi->b", (x, y), lambda X, Y: (X * Y).sum(1)),
        "ij->ji (a view in both)": ("ij->ji", (a,), None),
        "iij->j": ("iij->j", (m,), None),
    }
    tensors = {name: [ae.tensor(v) for v in arrays] for name, (_, arrays, _) in cases.items()}
    for name, (spec, arrays, _) in cases.items():
        np.testing.assert_allclose(np.asarray(ae.einsum(spec, *tensors[name])), np.einsum(spec, *arrays),
                                   rtol=1e-3, atol=1e-2, err_msg=name)
    for r in range(args.rounds):
        cells = []
        for name, (spec, arrays, direct) in cases.items():
            ts = tensors[name]
            n = timed(lambda: np.einsum(spec, *arrays, optimize=True))
            e = timed(lambda: ae.einsum(spec, *ts).realize())
            cell = f"{name} {e * 1e3:.2f} vs numpy {n * 1e3:.2f} ms ({e / n:.2f}x)"
            if direct is not None:
                d = timed(lambda: direct(*ts).realize())
                cell += f", direct {d * 1e3:.2f} ms"
            cells.append(cell)
        print(f"round {r + 1}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
