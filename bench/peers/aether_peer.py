# aether's side of the comparison: `aether bench <name> ... --json` as a subprocess (it does its own
# warm-up and timed runs), its peak RSS (os.wait4's ru_maxrss, less that of an aether process that
# does nothing, as the peers' growth over their imports) and the wall time of a whole process.
import json
import os
import subprocess
import time

from . import common

# Our benchmark names -> `aether bench` arguments and where its JSON keeps the median.
ARGS = {
    "stream": ["stream"],
    "bn-relu": ["bn-relu", "--shape", "%d,%d,%d,%d" % (common.BN_SHAPE[0], common.BN_SHAPE[2],
                                                      common.BN_SHAPE[3], common.BN_SHAPE[1])],
    "relu-backward": ["relu-backward", "--shape", "%d,%d,%d,%d" % (common.BN_SHAPE[0], common.BN_SHAPE[2],
                                                                  common.BN_SHAPE[3], common.BN_SHAPE[1])],
    "conv": ["conv", "--shape", "%d,%d,%d,%d" % (common.CONV_SHAPE[0], common.CONV_SHAPE[2],
                                                common.CONV_SHAPE[3], common.CONV_SHAPE[1]),
             "--channels", str(common.CONV_OUT)],
}


def args_of(name):
  if name.startswith("step-"):  # step-B or step-B-bf16
    parts = name.split("-")
    return ["step", "--model", "cifarnet", "--batch", parts[1]] + (["--precision", parts[2]] if len(parts) > 2 else [])
  if name.startswith("resnet20-"):  # resnet20-B
    return ["step", "--model", "resnet20", "--batch", name.split("-")[1]]
  return list(ARGS[name])


def env_of(threads, cache_dir=None):
  env = dict(os.environ)
  if threads:
    env["AETHER_NUM_THREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
  if cache_dir:
    env["AETHER_CACHE_DIR"] = cache_dir
  return env


def _run(cmd, env, timeout):
  """Runs cmd; returns (returncode, stdout, stderr, wall seconds)."""
  t0 = time.perf_counter()
  p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
  try:
    out, err = p.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    p.kill()
    out, err = p.communicate()
    raise RuntimeError("%s: timed out after %ds" % (" ".join(cmd), timeout))
  wall = time.perf_counter() - t0
  return p.returncode, out, err, wall


def bench(binary, name, runs, warmup=None, threads=0, cache_dir=None, extra=(), timeout=900):
  """Runs `aether bench` and returns its JSON object, plus "wall_s" (the whole process)."""
  cmd = [binary, "bench"] + args_of(name) + ["--json", "--runs", str(runs)] + list(extra)
  if warmup is not None:
    cmd += ["--warmup", str(warmup)]
  if threads:
    cmd += ["--threads", str(threads)]
  rc, out, err, wall = _run(cmd, env_of(threads, cache_dir), timeout)
  if rc != 0:
    raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), rc, (err.strip().splitlines() or [""])[-1]))
  j = json.loads(out[out.index("{"):])
  j["wall_s"] = wall
  j["command"] = " ".join(cmd[1:])
  return j


def run_rss(cmd, env, timeout=900):
  """Runs cmd with its output discarded; returns (returncode, wall seconds, peak RSS bytes, stdout)."""
  t0 = time.perf_counter()
  p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
  deadline = t0 + timeout
  out_chunks = []
  # Read stdout until EOF, then reap the child with wait4 to get its own rusage.
  for line in p.stdout:
    out_chunks.append(line)
    if time.perf_counter() > deadline:
      p.kill()
      break
  _, status, ru = os.wait4(p.pid, 0)
  p.returncode = os.waitstatus_to_exitcode(status)
  return p.returncode, time.perf_counter() - t0, ru.ru_maxrss * 1024, "".join(out_chunks)


def memory(binary, name, threads=0, cache_dir=None, steps=2):
  """Peak RSS growth of `aether bench step` running 1 + steps steps, over an idle aether process."""
  env = env_of(threads, cache_dir)
  _, _, base, _ = run_rss([binary, "bench", "--help"], env)
  cmd = [binary, "bench"] + args_of(name) + ["--json", "--runs", str(steps), "--warmup", "1"]
  rc, wall, peak, out = run_rss(cmd, env)
  if rc != 0:
    raise RuntimeError("%s: exit %d" % (" ".join(cmd), rc))
  j = json.loads(out[out.index("{"):])
  res = {"baseline_rss_bytes": base, "peak_rss_growth_bytes": peak - base, "steps": 1 + steps,
         "wall_s": wall}
  for k in ("peak_bytes", "peak_memory_bytes", "arena_bytes"):
    if k in j:
      res["aether_" + k] = j[k]
  return res


def first_step(binary, batch, cache_dir, threads=0):
  """Wall time of `aether bench step --runs 1 --warmup 0` (process start to the end of one step)."""
  cmd = [binary, "bench", "step", "--model", "cifarnet", "--batch", str(batch), "--runs", "1", "--warmup", "0",
         "--json"]
  rc, wall, peak, out = run_rss(cmd, env_of(threads, cache_dir))
  if rc != 0:
    raise RuntimeError("%s: exit %d" % (" ".join(cmd), rc))
  j = json.loads(out[out.index("{"):])
  return {"wall_s": wall, "step_ms": j.get("median_ms"), "command": " ".join(cmd[1:])}
