#!/usr/bin/env python3
"""Times the same workloads in aether and its peers, alternating the frameworks in one run.

Workloads (the shapes of `aether bench`'s defaults): BatchNorm2d(train)+ReLU forward+backward at
(256,32,32,32); ReLU backward alone at that shape (PyTorch: threshold_backward through autograd, and
the expression dy * (out > 0)); conv3x3 64->64 on (64,64,32,32), forward and forward+backward; one
cifarnet training step (forward, loss, backward, SGD) at batch 64 and 256, and a resnet20 step at
batch 128 (not in JAX). Frameworks: aether
(`aether bench ... --json`), PyTorch eager NCHW, PyTorch eager channels-last, torch.compile
(channels-last) and JAX jit (NHWC); each peer runs in its own worker process
(bench/peers/worker.py) and is skipped with a message when it cannot be imported.

Each round runs every framework once (the starting framework rotates) -- aether as a fresh
`aether bench` process with its own warm-up and --runs timed runs, a peer with one warm-up call and
--runs timed calls -- so load from other jobs falls on all of them alike. Reported: per framework the
median over the rounds' medians, and the ratio aether / peer (below 1: aether is faster). Also: the
machine's copy bandwidth and FMA peak (`aether bench stream`), the peak RSS growth of a process that
runs only the cifarnet step, and aether's first-step time with a cold and a warm kernel cache.
"""
import argparse
import datetime
import json
import os
import platform
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peers import aether_peer, common  # noqa: E402

PEERS = ("torch-nchw", "torch-cl", "torch-compile", "jax")
FRAMEWORKS = ("aether",) + PEERS
# Groups of rows that one `aether bench` invocation measures together.
GROUPS = {
    "bn-relu": ["bn-relu"],
    "relu-backward": ["relu-backward", "relu-backward-expr"],
    "conv": ["conv-forward", "conv-forward-backward"],
    "step-64": ["step-64"],
    "step-256": ["step-256"],
    # Mixed precision (issue 15): aether --precision bf16 against PyTorch under
    # torch.autocast("cpu", torch.bfloat16); JAX is not measured in bfloat16.
    "step-64-bf16": ["step-64-bf16"],
    "step-256-bf16": ["step-256-bf16"],
    "resnet20-128": ["resnet20-128"],  # the resnet20 preset's step at its batch size
}
SECTIONS = ("stream",) + tuple(GROUPS) + ("memory", "first-step")
TITLES = {
    "bn-relu": "BN(train)+ReLU fwd+bwd (256,32,32,32)",
    "relu-backward": "ReLU backward (threshold_backward)",
    "relu-backward-expr": "ReLU backward as dy*(out>0)",
    "conv-forward": "conv3x3 64->64 (64,64,32,32) fwd",
    "conv-forward-backward": "conv3x3 64->64 fwd+bwd",
    "step-64": "cifarnet step, batch 64",
    "step-256": "cifarnet step, batch 256",
    "step-64-bf16": "cifarnet step, batch 64, bfloat16",
    "step-256-bf16": "cifarnet step, batch 256, bfloat16",
    "resnet20-128": "resnet20 step, batch 128",
}


def log(*a):
  print(*a, file=sys.stderr, flush=True)


class Worker:
  """A peer framework's worker process (bench/peers/worker.py serve mode)."""

  def __init__(self, python, framework, threads):
    self.framework = framework
    cmd = [python, os.path.join(HERE, "peers", "worker.py"), "--framework", framework]
    if threads:
      cmd += ["--threads", str(threads)]
    self.stderr = tempfile.TemporaryFile(mode="w+")
    self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                              text=True, bufsize=1)
    hello = self._read(300)
    if not hello.get("ok"):
      self.close()
      raise RuntimeError(hello.get("error", "failed to start"))

  def _read(self, timeout):
    r, _, _ = select.select([self.p.stdout], [], [], timeout)
    line = self.p.stdout.readline() if r else ""
    if not line:
      self.stderr.seek(0)
      tail = self.stderr.read().strip().splitlines()[-3:]
      raise RuntimeError("%s worker %s: %s" % (self.framework, "timed out" if not r else "exited",
                                                " | ".join(tail)))
    return json.loads(line)

  def ask(self, timeout=900, **req):
    self.p.stdin.write(json.dumps(req) + "\n")
    self.p.stdin.flush()
    res = self._read(timeout)
    if not res.get("ok"):
      raise RuntimeError(res.get("error", "failed"))
    return res

  def close(self):
    try:
      if self.p.poll() is None:
        self.p.stdin.write(json.dumps({"op": "quit"}) + "\n")
        self.p.stdin.flush()
        self.p.wait(timeout=30)
    except Exception:
      self.p.kill()
      self.p.wait()


def find_aether(given):
  if given:
    return given
  for p in ("build/aether", "build-rel/aether", "build-release/aether"):
    cand = os.path.join(os.path.dirname(HERE), p)
    if os.path.exists(cand):
      return cand
  return shutil.which("aether") or "build/aether"


def machine():
  try:
    with open("/proc/cpuinfo") as f:
      first = f.read().split("\n\n", 1)[0]  # the first processor's block
  except OSError:
    first = ""
  fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in first.splitlines())}
  cpu = fields.get("model name", "")
  isa = sorted(x for x in fields.get("flags", "").split() if x.startswith(("avx", "fma", "amx")))
  return {"cpu": cpu, "cores": os.cpu_count(), "isa": isa, "os": platform.platform(),
          "python": platform.python_version()}


# --isa: the same cap for every framework, through the environment every worker inherits.
ISA_ENV = {
    "avx2": {"AETHER_CPU_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2",
             "ATEN_CPU_CAPABILITY": "avx2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"},
    "avx512": {"AETHER_CPU_ISA": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
               "DNNL_MAX_CPU_ISA": "AVX512_CORE_BF16", "ATEN_CPU_CAPABILITY": "avx512",
               "XLA_FLAGS": "--xla_cpu_max_isa=AVX512"},
    "native": {},
}


def apply_isa(level):
  env = dict(ISA_ENV[level])
  if "XLA_FLAGS" in env and os.environ.get("XLA_FLAGS"):
    env["XLA_FLAGS"] = os.environ["XLA_FLAGS"] + " " + env["XLA_FLAGS"]
  os.environ.update(env)
  return env


def aether_isa(aether):
  """`aether devices`' line of the instruction sets in use (kernels and oneDNN), under the cap."""
  try:
    out = subprocess.run([aether, "devices"], capture_output=True, text=True, timeout=120).stdout
  except (OSError, subprocess.SubprocessError):
    return ""
  return next((l.strip() for l in out.splitlines() if "instruction sets" in l), "")


def tool_version(cmd):
  try:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
  except Exception:
    return None


class Comparison:
  def __init__(self, a):
    self.a = a
    self.results = {row: {} for rows in GROUPS.values() for row in rows}
    self.versions = {}  # the peers' versions, as the memory runs report them
    self.loadavg = []  # the 1-minute load average after each round: other jobs on the machine

  # ---- aether -----------------------------------------------------------------------------------
  def aether_round(self, group, runs):
    """One `aether bench` process for the group; returns {row: (median_ms, json)}."""
    name = "conv" if group == "conv" else group
    j = aether_peer.bench(self.a.aether, name, runs, threads=self.a.threads)
    if group == "conv":
      return {"conv-forward": (j["median_ms"], j),
              "conv-forward-backward": (j["forward_backward"]["median_ms"], j["forward_backward"])}
    if group == "relu-backward":
      return {"relu-backward": (j["median_ms"], j), "relu-backward-expr": (j["median_ms"], j)}
    return {group: (j["median_ms"], j)}

  # ---- the alternating rounds -------------------------------------------------------------------
  def run_group(self, group, workers):
    a = self.a
    rows = GROUPS[group]
    runs = a.big_runs if group.startswith("step-256") else a.runs
    log("== %s: setting up %s" % (group, ", ".join(workers) or "no peers"))
    ready = {}  # framework -> rows it set up
    for fw, w in workers.items():
      for row in rows:
        try:
          r = w.ask(op="setup", bench=row)
          self.results[row].setdefault(fw, {})["setup_s"] = r["setup_s"]
          ready.setdefault(fw, []).append(row)
          log("   %-14s %-22s set up in %.1f s" % (fw, row, r["setup_s"]))
        except Exception as e:
          self.results[row][fw] = {"error": str(e)}
          log("   %-14s %-22s skipped: %s" % (fw, row, e))
    order = (["aether"] if "aether" in a.frameworks else []) + [fw for fw in PEERS if fw in ready]
    for rnd in range(a.rounds):
      k = rnd % len(order)
      for fw in order[k:] + order[:k]:
        if fw == "aether":
          try:
            for row, (ms, j) in self.aether_round(group, runs).items():
              r = self.results[row].setdefault("aether", {"round_median_ms": [], "json": []})
              r["round_median_ms"].append(ms)
              r["json"].append(j)
          except Exception as e:
            log("   aether %s failed: %s" % (group, e))
            for row in rows:
              self.results[row].setdefault("aether", {})["error"] = str(e)
          continue
        for row in ready[fw]:
          try:
            ms = workers[fw].ask(op="run", bench=row, iters=runs, warmup=1)["ms"]
            r = self.results[row][fw]
            r.setdefault("round_median_ms", []).append(common.median(ms))
            r.setdefault("ms", []).append(ms)
          except Exception as e:
            self.results[row][fw]["error"] = str(e)
            log("   %s %s failed: %s" % (fw, row, e))
      self.loadavg.append(os.getloadavg()[0])
      log("   round %d/%d (load %.1f): %s" % (rnd + 1, a.rounds, self.loadavg[-1], "  ".join(
          "%s %s" % (fw, "/".join("%.1f" % self.results[row][fw]["round_median_ms"][-1] for row in rows
                                  if self.results[row].get(fw, {}).get("round_median_ms")))
          for fw in order)))
    for fw, w in workers.items():
      for row in ready.get(fw, []):
        try:
          w.ask(op="drop", bench=row)
        except Exception:
          pass
    for row in rows:
      for fw, r in self.results[row].items():
        if r.get("round_median_ms"):
          r["median_ms"] = common.median(r["round_median_ms"])
          r["min_round_median_ms"] = min(r["round_median_ms"])

  # ---- memory and first step --------------------------------------------------------------------
  def memory(self, peers_ok, batches):
    a = self.a
    out = {}
    for b in batches:
      row = "step-%d" % b
      out[row] = {}
      for fw in [f for f in FRAMEWORKS if f == "aether" and f in a.frameworks] + list(peers_ok):
        try:
          if fw == "aether":
            r = aether_peer.memory(a.aether, row, threads=a.threads, steps=2)
          else:
            cmd = [a.python, os.path.join(HERE, "peers", "worker.py"), "--framework", fw, "--memory", row,
                   "--steps", "2", "--t0", repr(time.time())]
            if a.threads:
              cmd += ["--threads", str(a.threads)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            r = json.loads(lines[-1]) if lines else {"ok": False, "error": p.stderr.strip()[-300:]}
            if not r.pop("ok", False):
              raise RuntimeError(r.get("error"))
            self.versions.update(r.pop("versions", {}))
          out[row][fw] = r
          log("   memory %-9s %-14s peak RSS growth %7.1f MiB%s" % (
              row, fw, r["peak_rss_growth_bytes"] / 2**20,
              "" if r.get("steady_peak_rss_growth_bytes") is None else
              " (after warm-up: %.1f MiB)" % (r["steady_peak_rss_growth_bytes"] / 2**20)))
        except Exception as e:
          out[row][fw] = {"error": str(e)}
          log("   memory %s %s failed: %s" % (row, fw, e))
    return out

  def first_step(self):
    a = self.a
    d = tempfile.mkdtemp(prefix="aether-cold-cache-")
    try:
      cold = aether_peer.first_step(a.aether, 64, d, a.threads)
      n = sum(len(fs) for _, _, fs in os.walk(d))
      warm = aether_peer.first_step(a.aether, 64, d, a.threads)
    finally:
      shutil.rmtree(d, ignore_errors=True)
    log("   first step (batch 64): cold cache %.1f s (%d files cached), warm cache %.2f s"
        % (cold["wall_s"], n, warm["wall_s"]))
    return {"cold": cold, "warm": warm, "cold_cache_files": n}


def fmt_ms(r):
  if not r:
    return "-"
  if "median_ms" not in r:
    return "error" if "error" in r else "-"
  return "%.2f" % r["median_ms"] if r["median_ms"] < 100 else "%.1f" % r["median_ms"]


def table(results, frameworks):
  hdr = ["benchmark (median ms; aether/peer)"] + list(frameworks)
  rows = [hdr]
  for row, per in results.items():
    if not any("median_ms" in r for r in per.values()):
      continue
    base = per.get("aether", {}).get("median_ms")
    cells = [TITLES[row]]
    for fw in frameworks:
      r = per.get(fw)
      c = fmt_ms(r)
      if fw != "aether" and base and r and r.get("median_ms"):
        c += " (%.2fx)" % (base / r["median_ms"])
      cells.append(c)
    rows.append(cells)
  widths = [max(len(r[i]) for r in rows) for i in range(len(hdr))]
  lines = []
  for i, r in enumerate(rows):
    lines.append("  ".join(c.ljust(widths[k]) if k == 0 else c.rjust(widths[k]) for k, c in enumerate(r)))
    if i == 0:
      lines.append("-" * len(lines[0]))
  return "\n".join(lines)


def targets(res, stream, mem, first):
  """The issue's targets, each as (name, value text, met or None when not measured)."""
  out = []

  def med(row, fw):
    return res.get(row, {}).get(fw, {}).get("median_ms")

  def best(row, fws):
    v = [med(row, f) for f in fws if med(row, f)]
    return min(v) if v else None

  copy = stream.get("copy_gb_per_s") if stream else None
  fma = stream.get("fma_gflop_per_s") if stream else None
  # A peak below what a convolution reached is a failed measurement (a loaded machine can stall the
  # short calibration passes of `bench stream`); then the conv-FLOP limit is not judged.
  conv_flop = 2.0 * common.CONV_SHAPE[0] * common.CONV_SHAPE[1] * common.CONV_SHAPE[2] * common.CONV_SHAPE[3] \
      * common.CONV_OUT * 9
  conv_ms = [r["median_ms"] for r in res.get("conv-forward", {}).values() if r.get("median_ms")]
  if fma and conv_ms and conv_flop / (min(conv_ms) * 1e-3) / 1e9 > fma:
    out.append(("FMA peak measurement plausible", "%.1f GFLOP/s < a conv's %.1f GFLOP/s: not used"
                % (fma, conv_flop / (min(conv_ms) * 1e-3) / 1e9), False))
    fma = None
  ae = med("bn-relu", "aether")
  if ae:
    eager = best("bn-relu", ["torch-nchw", "torch-cl"])
    comp = best("bn-relu", ["torch-compile", "jax"])
    if eager:
      out.append(("bn-relu >= 5x faster than PyTorch eager", "%.2fx" % (eager / ae), eager / ae >= 5))
    if comp:
      out.append(("bn-relu no slower than the fastest compiled peer", "aether/best = %.2f" % (ae / comp),
                  ae <= comp))
    js = res["bn-relu"]["aether"]["json"]
    gbs = common.median([j["gb_per_s"] for j in js])
    if copy:
      out.append(("bn-relu >= 75% of copy bandwidth (bytes moved)",
                  "%.1f GB/s = %.0f%% of %.1f" % (gbs, 100 * gbs / copy, copy), gbs >= 0.75 * copy))
  ar = med("relu-backward", "aether")
  if ar and copy:
    gbs = common.median([j["gb_per_s"] for j in res["relu-backward"]["aether"]["json"]])
    out.append(("relu-backward >= 80% of copy bandwidth", "%.1f GB/s = %.0f%%" % (gbs, 100 * gbs / copy),
                gbs >= 0.8 * copy))
  for row in ("conv-forward", "conv-forward-backward"):
    a_, t = med(row, "aether"), med(row, "torch-cl")
    if a_ and t:
      out.append(("%s within 10%% of PyTorch channels-last" % row, "aether/torch-cl = %.2f" % (a_ / t),
                  a_ <= 1.10 * t))
  for b in (64, 256):
    row = "step-%d" % b
    a_ = med(row, "aether")
    if not a_:
      continue
    t = med(row, "torch-cl")
    if t:
      out.append(("%s <= 0.95x PyTorch eager channels-last" % row, "%.2fx" % (a_ / t), a_ <= 0.95 * t))
    comp = best(row, ["torch-compile", "jax"])
    if comp:
      out.append(("%s no slower than the fastest compiled peer" % row, "aether/best = %.2f" % (a_ / comp),
                  a_ <= comp))
    if fma:
      limit_ms = common.cifarnet_conv_flops(b) / (fma * 1e9) * 1e3
      out.append(("%s within 1.15x of the conv-FLOP limit" % row,
                  "%.1f ms vs limit %.1f ms = %.2fx" % (a_, limit_ms, a_ / limit_ms), a_ <= 1.15 * limit_ms))
    m = (mem or {}).get(row, {})
    am = m.get("aether", {}).get("peak_rss_growth_bytes")
    tm = [m[f]["peak_rss_growth_bytes"] for f in ("torch-nchw", "torch-cl", "torch-compile")
          if m.get(f, {}).get("peak_rss_growth_bytes")]
    if am and tm:
      out.append(("%s peak memory <= PyTorch's (RSS growth)" % row,
                  "aether %.0f MiB vs PyTorch best %.0f MiB" % (am / 2**20, min(tm) / 2**20), am <= min(tm)))
  # bfloat16 (issue 15): with native BF16 <= 0.7x aether's float32 step and faster than PyTorch
  # autocast; without it no more than 10% slower than float32.
  native = "avx512_bf16" in (machine().get("isa") or []) and os.environ.get("AETHER_CPU_ISA") != "avx2"
  for b in (64, 256):
    f32, bf = med("step-%d" % b, "aether"), med("step-%d-bf16" % b, "aether")
    if f32 and bf:
      goal = 0.7 if native else 1.10
      out.append(("step-%d bf16 <= %.2fx aether float32 (%s native BF16)" % (b, goal, "with" if native else "no"),
                  "%.2fx" % (bf / f32), bf <= goal * f32))
    t = best("step-%d-bf16" % b, ["torch-nchw", "torch-cl", "torch-compile"])
    if bf and t:
      out.append(("step-%d bf16 faster than PyTorch bf16 autocast" % b, "aether/best = %.2f" % (bf / t), bf < t))
  if first:
    out.append(("first step, cold kernel cache < 30 s", "%.1f s" % first["cold"]["wall_s"],
                first["cold"]["wall_s"] < 30))
    out.append(("first step, warm kernel cache < 2 s", "%.2f s" % first["warm"]["wall_s"],
                first["warm"]["wall_s"] < 2))
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--aether", help="the aether binary (default: build/aether or the first that exists)")
  ap.add_argument("--python", default=os.environ.get("AETHER_PEERS_PYTHON", sys.executable),
                  help="the Python that has torch / jax, for the peer workers (default: "
                       "$AETHER_PEERS_PYTHON, else this one)")
  ap.add_argument("--runs", type=int, default=5, help="timed iterations per framework per round (default 5)")
  ap.add_argument("--big-runs", type=int, default=3,
                  help="timed iterations per round for the batch-256 cifarnet step (default 3)")
  ap.add_argument("--rounds", type=int, default=3, help="alternation rounds (default 3)")
  ap.add_argument("--threads", type=int, default=0,
                  help="threads for every framework (torch.set_num_threads, XLA pinned to N CPUs, "
                       "AETHER_NUM_THREADS); default: each one's default (the cores)")
  ap.add_argument("--only", nargs="+", choices=SECTIONS, metavar="SECTION",
                  help="run only these: " + " ".join(SECTIONS))
  ap.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS),
                  help="frameworks to run (default: all)")
  ap.add_argument("--json", metavar="OUT", help="write all results as JSON")
  ap.add_argument("--isa", choices=sorted(ISA_ENV), default="native",
                  help="cap every framework's CPU instruction set: avx2 or avx512 (AETHER_CPU_ISA, "
                       "ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA, ATEN_CPU_CAPABILITY, XLA's --xla_cpu_max_isa); "
                       "default native: no cap")
  a = ap.parse_args()
  isa_env = apply_isa(a.isa)
  a.aether = find_aether(a.aether)
  if not os.path.exists(a.aether):
    sys.exit("compare.py: no aether binary at %s (build it, or pass --aether PATH)" % a.aether)
  sections = a.only or list(SECTIONS)
  t_start = time.time()
  cmp = Comparison(a)
  info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
          "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]), "machine": machine(),
          "settings": {"runs": a.runs, "big_runs": a.big_runs, "rounds": a.rounds, "threads": a.threads,
                       "aether": a.aether, "aether_cache_dir": os.environ.get("AETHER_CACHE_DIR"),
                       "isa": a.isa, "isa_env": isa_env, "aether_isa": aether_isa(a.aether)},
          "versions": {"aether_cxx": tool_version(["c++", "--version"])}, "loadavg_start": os.getloadavg()}
  log("compare.py: %s, %d cores; aether %s" % (info["machine"]["cpu"], os.cpu_count(), a.aether))
  log("ISA: the CPU has %s; --isa %s; aether: %s" % (" ".join(info["machine"]["isa"]) or "?", a.isa,
                                                      info["settings"]["aether_isa"]))

  stream = None
  if "stream" in sections:
    stream = aether_peer.bench(a.aether, "stream", 5, threads=a.threads)
    log("machine: copy %.1f GB/s, FMA peak %.1f GFLOP/s (aether bench stream, %d threads)"
        % (stream["copy_gb_per_s"], stream["fma_gflop_per_s"], stream["threads"]))

  # The peers, each in its own process; one that cannot be imported is skipped.
  workers = {}
  want = [fw for fw in PEERS if fw in a.frameworks]
  if any(s in GROUPS for s in sections):
    for fw in want:
      try:
        workers[fw] = Worker(a.python, fw, a.threads)
        info["versions"].update(workers[fw].ask(op="versions", timeout=120)["versions"])
      except Exception as e:
        print("skipping %s: %s" % (fw, e), flush=True)
  try:
    for g in GROUPS:
      if g in sections:
        cmp.run_group(g, workers)
  finally:
    for w in workers.values():
      w.close()

  mem = None
  if "memory" in sections:
    ok = [fw for fw in want if fw in workers] if workers else want
    log("== memory: peak RSS growth of a process that runs only the cifarnet step")
    mem = cmp.memory(ok, [64, 256])
  first = None
  if "first-step" in sections:
    log("== first step: aether bench step --batch 64 --runs 1 --warmup 0, empty then warm kernel cache")
    first = cmp.first_step()

  # ---- report ---------------------------------------------------------------------------------------
  fws = [fw for fw in FRAMEWORKS if fw in a.frameworks]
  for k, v in cmp.versions.items():
    info["versions"].setdefault(k, v)
  print()
  print("compare.py, %s, %s (%d cores), %s" % (info["date"], info["machine"]["cpu"], os.cpu_count(),
                                               ", ".join("%s %s" % kv for kv in info["versions"].items()
                                                         if kv[0] in ("torch", "jax"))))
  print("CPU flags: %s; ISA level: %s%s; aether: %s" % (
      " ".join(info["machine"]["isa"]) or "?", a.isa,
      " (" + ", ".join("%s=%s" % kv for kv in isa_env.items()) + ")" if isa_env else " (no cap)",
      info["settings"]["aether_isa"]))
  print("%d rounds, frameworks alternating; per round %d timed iterations (%d at batch 256) after warm-up"
        % (a.rounds, a.runs, a.big_runs))
  if stream:
    print("machine limits (aether bench stream): copy %.1f GB/s, FMA peak %.1f GFLOP/s"
          % (stream["copy_gb_per_s"], stream["fma_gflop_per_s"]))
  if any("median_ms" in r for per in cmp.results.values() for r in per.values()):
    print()
    print(table(cmp.results, fws))
    print("(x.xx) = aether time / peer time: below 1, aether is faster")
  if mem:
    print("\npeak RSS growth over the process after imports, cifarnet step (MiB; after warm-up in brackets):")
    for row, per in mem.items():
      cells = []
      for fw in fws:
        r = per.get(fw)
        if not r or "error" in r:
          continue
        s = "%s %.0f" % (fw, r["peak_rss_growth_bytes"] / 2**20)
        if r.get("steady_peak_rss_growth_bytes") is not None:
          s += " [%.0f]" % (r["steady_peak_rss_growth_bytes"] / 2**20)
        if r.get("aether_peak_bytes"):
          s += " (bench step peak_bytes %.0f)" % (r["aether_peak_bytes"] / 2**20)
        cells.append(s)
      print("  %-9s %s" % (row, ", ".join(cells)))
    print("time from process start to the end of the first step, batch 64 (peers: warm on-disk caches):")
    print("  " + ", ".join("%s %.1f s" % (fw, r["first_step_s"]) for fw, r in mem.get("step-64", {}).items()
                          if r.get("first_step_s")))
  if first:
    print("aether first step (batch 64, process start to exit): cold kernel cache %.1f s (the step itself "
          "%.1f s), warm %.2f s (the step itself %.2f s)" % (first["cold"]["wall_s"], first["cold"]["step_ms"] / 1e3,
                                                           first["warm"]["wall_s"], first["warm"]["step_ms"] / 1e3))
  setups = ["%s %s %.0f s" % (fw, row, r["setup_s"]) for row, per in cmp.results.items()
            for fw, r in per.items() if r.get("setup_s", 0) > 5]
  if setups:
    print("peer set-up (build + first call, compiles) over 5 s: " + ", ".join(setups))
  tg = targets(cmp.results, stream, mem, first)
  if tg:
    print("\nissue 5 targets:")
    for name, val, ok in tg:
      print("  [%s] %-60s %s" % ("met " if ok else "MISS", name, val))
  total = time.time() - t_start
  print("\ntotal %.0f s; 1-minute load average (%d cores): %.1f at the start, %s after the rounds, %.1f at the end"
        % (total, os.cpu_count(), info["loadavg_start"][0],
           "-".join("%.1f" % x for x in (min(cmp.loadavg), max(cmp.loadavg))) if cmp.loadavg else "-",
           os.getloadavg()[0]))
  if a.json:
    out = dict(info, loadavg_after_rounds=cmp.loadavg, loadavg_end=os.getloadavg(), stream=stream, results=cmp.results, memory=mem, first_step=first,
               targets=[{"target": n, "value": v, "met": ok} for n, v, ok in tg],
               conv_flops_per_step={b: common.cifarnet_conv_flops(b) for b in (64, 256)}, total_s=total)
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
      json.dump(out, f, indent=1)
    print("wrote %s" % a.json)


if __name__ == "__main__":
  main()
