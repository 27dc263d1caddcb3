# One peer framework in its own process, so that its thread pools and allocator do not disturb the
# others. Two modes:
#   serve (default): JSON lines on stdin, one JSON line answered per request on the protocol pipe
#     {"op": "versions"} | {"op": "setup", "bench": B} (builds B, runs it twice: compiles) |
#     {"op": "run", "bench": B, "iters": K, "warmup": W} -> {"ms": [...]} | {"op": "drop", "bench": B}
#   --memory B: builds and runs B alone (1 + --steps calls) and prints one JSON object: the peak RSS
#     growth over the RSS after imports, and the time from --t0 (the parent's launch time) to the end
#     of the first call.
# Frameworks: torch-nchw, torch-cl, torch-compile (bench/peers/torch_peer.py), jax (jax_peer.py).
import argparse
import json
import os
import sys
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peers import common  # noqa: E402

FRAMEWORKS = ("torch-nchw", "torch-cl", "torch-compile", "jax")


def load(framework, threads):
  """Imports the framework; returns (module, variant)."""
  if framework == "jax":
    from peers import jax_peer
    import jax
    jax.devices()  # initialise the CPU client now (part of the baseline)
    return jax_peer, "jit"
  from peers import torch_peer
  torch_peer.set_threads(threads)
  return torch_peer, framework.split("-")[1]


def serve(mod, variant, proto):
  benches = {}

  def answer(obj):
    proto.write(json.dumps(obj) + "\n")
    proto.flush()

  for line in sys.stdin:
    req = json.loads(line)
    op = req.get("op")
    try:
      if op == "quit":
        answer({"ok": True})
        return
      if op == "versions":
        answer({"ok": True, "versions": mod.versions()})
      elif op == "setup":
        t0 = time.perf_counter()
        fn = mod.make(req["bench"], variant)
        fn()  # the first calls compile (torch.compile, jax.jit); the second sees the optimizer state
        fn()
        benches[req["bench"]] = fn
        answer({"ok": True, "setup_s": time.perf_counter() - t0})
      elif op == "run":
        fn = benches[req["bench"]]
        answer({"ok": True, "ms": common.time_calls(fn, int(req["iters"]), int(req.get("warmup", 1)))})
      elif op == "drop":
        benches.pop(req["bench"], None)
        import gc
        gc.collect()
        answer({"ok": True})
      else:
        answer({"ok": False, "error": "unknown op %r" % op})
    except Exception as e:  # reported to compare.py, which skips this framework for the benchmark
      traceback.print_exc(file=sys.stderr)
      answer({"ok": False, "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")})


def memory(mod, variant, bench, steps, t0):
  base = common.peak_rss_bytes()  # after imports
  fn = mod.make(bench, variant)
  fn()
  first_step_s = time.time() - t0 if t0 else None
  peak_first = common.peak_rss_bytes()
  reset = common.reset_peak_rss()  # the steady state: without compile-time peaks
  for _ in range(steps):
    fn()
  peak_steady = common.peak_rss_bytes()
  peak_all = max(peak_first, peak_steady) if reset else peak_steady
  return {"baseline_rss_bytes": base, "peak_rss_growth_bytes": peak_all - base,
          "steady_peak_rss_growth_bytes": (peak_steady - base) if reset else None,
          "first_step_s": first_step_s, "steps": 1 + steps}


def main():
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument("--framework", required=True, choices=FRAMEWORKS)
  ap.add_argument("--threads", type=int, default=0)
  ap.add_argument("--memory", metavar="BENCH")
  ap.add_argument("--steps", type=int, default=2)
  ap.add_argument("--t0", type=float, default=0.0)
  a = ap.parse_args()
  common.limit_threads(a.threads)
  # The protocol gets the real stdout; anything a library prints goes to stderr.
  proto = os.fdopen(os.dup(1), "w")
  os.dup2(2, 1)
  sys.stdout = sys.stderr
  try:
    mod, variant = load(a.framework, a.threads)
  except Exception as e:
    proto.write(json.dumps({"ok": False, "error": "cannot import %s: %s" % (a.framework, e)}) + "\n")
    proto.flush()
    return 3
  if a.memory:
    try:
      out = memory(mod, variant, a.memory, a.steps, a.t0)
      out["ok"] = True
      out["versions"] = mod.versions()
    except Exception as e:
      traceback.print_exc(file=sys.stderr)
      out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    proto.write(json.dumps(out) + "\n")
    proto.flush()
    return 0
  proto.write(json.dumps({"ok": True, "ready": True}) + "\n")
  proto.flush()
  serve(mod, variant, proto)
  return 0


if __name__ == "__main__":
  sys.exit(main())
