"""The cost of driving aether from Python: one epoch of Fashion-MNIST `lenet` trained from Python
with NumPy arrays against the same epoch from the CLI (`aether train`), same model, seed and batch
size, the two alternating in one run. Reports the median epoch time of each (the training loop, as
each reports it), the median wall and CPU time (user + system) of each whole process, and their ratios.
On a shared machine the CPU time is the steadier figure: time the process waits for a core is not in it.

    python3 -m venv v && v/bin/pip install .
    v/bin/python bench/python_overhead.py --runs 5        # the CLI is v/bin/aether

The Python side is the program below (PY); it trains exactly what `aether train --model lenet`
trains: the preset's network and recipe, the data set's channel statistics, the same seed.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PY = """
import json, sys, time
import aether as ae
t0 = time.perf_counter()
(x, y), (xt, yt) = ae.datasets.fashion_mnist()
ae.manual_seed(int(sys.argv[1]))
model = ae.Model.preset("lenet", (28, 28, 1), 10)
h = model.train(x, y, epochs=1, seed=int(sys.argv[1]), validation_data=(xt, yt), verbose=False)
print(json.dumps({"epoch_seconds": h["seconds"][0], "val_accuracy": h["val_accuracy"][0]}))
"""


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_cli(cli, seed, tmp):
    out = os.path.join(tmp, "cli.json")
    c0, t0 = cpu_seconds(), time.perf_counter()
    subprocess.run([cli, "train", "--model", "lenet", "--dataset", "fashion-mnist", "--epochs", "1", "--seed",
                    str(seed), "--quiet", "--metrics-json", out], check=True, stdout=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    m = json.load(open(out))
    return {"epoch_seconds": m["history"][0]["seconds"], "val_accuracy": m["history"][0]["val_accuracy"],
            "wall": wall, "cpu": cpu}


def run_python(python, seed):
    c0, t0 = cpu_seconds(), time.perf_counter()
    r = subprocess.run([python, "-c", PY, str(seed)], check=True, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return {**json.loads(r.stdout.strip().splitlines()[-1]), "wall": wall, "cpu": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cli", default=shutil.which("aether") or os.path.join(os.path.dirname(sys.executable), "aether"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", help="write the raw runs here")
    a = ap.parse_args()
    runs = {"cli": [], "python": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            for side in (("cli", "python") if i % 2 == 0 else ("python", "cli")):
                r = run_cli(a.cli, a.seed, tmp) if side == "cli" else run_python(a.python, a.seed)
                runs[side].append(r)
                print(f"run {i + 1} {side:6s} epoch {r['epoch_seconds']:.2f} s  process {r['wall']:.2f} s (CPU {r['cpu']:.2f} s)  "
                      f"val_acc {r['val_accuracy']:.4f}", flush=True)
    med = {s: {k: statistics.median(r[k] for r in runs[s]) for k in ("epoch_seconds", "wall", "cpu")} for s in runs}
    # Each run's two sides ran back to back: their ratio is less exposed to a machine whose speed drifts.
    paired = statistics.median(p["epoch_seconds"] / c["epoch_seconds"] for c, p in zip(runs["cli"], runs["python"]))
    print(f"median epoch:   CLI {med['cli']['epoch_seconds']:.2f} s, Python {med['python']['epoch_seconds']:.2f} s, "
          f"ratio {med['python']['epoch_seconds'] / med['cli']['epoch_seconds']:.3f}")
    print(f"median process: CLI {med['cli']['wall']:.2f} s, Python {med['python']['wall']:.2f} s, "
          f"ratio {med['python']['wall'] / med['cli']['wall']:.3f}")
    print(f"median process CPU time: CLI {med['cli']['cpu']:.2f} s, Python {med['python']['cpu']:.2f} s, "
          f"ratio {med['python']['cpu'] / med['cli']['cpu']:.3f}")
    print(f"median of the per-run epoch ratios (Python / CLI): {paired:.3f}")
    if a.json:
        json.dump({"runs": runs, "median": med, "paired_epoch_ratio": paired}, open(a.json, "w"), indent=2)


if __name__ == "__main__":
    main()
