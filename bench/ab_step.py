#!/usr/bin/env python3
"""Two aether builds (or two settings) side by side: `aether bench step` of each, alternating, in one run.

    python3 bench/ab_step.py OLD/aether NEW/aether --batch 64 --rounds 5 --runs 10
    python3 bench/ab_step.py build/aether build/aether --old-env AETHER_CONV_PACKED_WEIGHTS=0

Each round runs both binaries once (the first one alternates), each a fresh process with its own
warm-up and --runs timed steps; reported are the median step time of each over the rounds, their
ratio (new / old: below 1, the new build is faster) and the median of the per-round ratios, which a
machine whose speed drifts disturbs less. Build the old commit in a worktree:
    git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build ... && cmake --build ...
"""
import argparse
import json
import os
import statistics
import subprocess


def step_ms(exe, model, batch, runs, env):
    out = subprocess.run([exe, "bench", "step", "--model", model, "--batch", str(batch), "--runs", str(runs),
                          "--warmup", "2", "--json"], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    return json.loads(out)["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--model", default="cifarnet")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10, help="timed steps per process (default 10)")
    ap.add_argument("--old-env", action="append", default=[], metavar="VAR=VALUE", help="environment of the old side")
    ap.add_argument("--new-env", action="append", default=[], metavar="VAR=VALUE", help="environment of the new side")
    a = ap.parse_args()
    envs = {side: dict(kv.split("=", 1) for kv in getattr(a, side + "_env")) for side in ("old", "new")}
    res = {"old": [], "new": []}
    for r in range(a.rounds):
        for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
            res[side].append(step_ms(getattr(a, side), a.model, a.batch, a.runs, envs[side]))
            print(f"round {r + 1} {side}: {res[side][-1]:.1f} ms", flush=True)
    mo, mn = statistics.median(res["old"]), statistics.median(res["new"])
    pr = statistics.median(n / o for o, n in zip(res["old"], res["new"]))
    print(f"{a.model} step, batch {a.batch}: old {mo:.1f} ms, new {mn:.1f} ms, new/old {mn / mo:.3f}, "
          f"median of the per-round ratios {pr:.3f}")


if __name__ == "__main__":
    main()
