# Shared by compare.py and the peer workers (stdlib only): the benchmark shapes (the same as
# `aether bench`'s defaults), the cifarnet and resnet20 recipes (src/model/presets.cpp), cifarnet's
# conv FLOPs, timing of repeated calls, and resident-memory readings from /proc.
import os
import resource
import statistics
import time

# BatchNorm2d(train) + ReLU, forward + backward; ReLU backward alone.  N, C, H, W (aether: N,H,W,C).
BN_SHAPE = (256, 32, 32, 32)
# conv3x3 'same', no bias: x (N, C, H, W) -> CONV_OUT channels.
CONV_SHAPE = (64, 64, 32, 32)
CONV_OUT = 64

# cifarnet (src/model/presets.cpp, include/aether/model/presets.h), for 32x32x3 images, 10 classes:
#   conv3x3(3->32, no bias) BN ReLU; for w in 64, 128, 256: conv3x3(c->w) maxpool2 BN ReLU,
#   conv3x3(w->w) BN ReLU; global max pool; Linear(256 -> 10, bias).
# BN: momentum 0.1, eps 1e-5, affine. Loss: cross entropy, label smoothing 0.2 (mean over the batch).
# SGD: momentum 0.9, Nesterov, weight decay 5e-4 (added to the gradient, all parameters, as PyTorch),
# lr = 0.1 / 25 (what `aether bench step` uses: the one-cycle start rate).
CIFARNET_WIDTHS = (64, 128, 256)
CIFARNET_IN = 3
CIFARNET_STEM = 32
CIFARNET_CLASSES = 10
LABEL_SMOOTHING = 0.2
LR = 0.1 / 25
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4
BN_MOMENTUM = 0.1
BN_EPS = 1e-5

# resnet20 (src/model/presets.cpp): conv3x3(3->16, no bias) BN ReLU; three stages of widths 16, 32,
# 64, each 3 blocks relu(conv3x3 BN ReLU conv3x3 BN (x) + shortcut(x)), the first block of stages 2
# and 3 with stride 2 and a conv1x1(stride 2, no bias) BN shortcut; global average pool;
# Linear(64 -> 10). Its step is timed with cifarnet's SGD settings and label smoothing 0.1 (the
# preset's); the values do not change the work.
RESNET20_WIDTHS = (16, 32, 64)
RESNET20_BLOCKS = 3
RESNET20_LABEL_SMOOTHING = 0.1


def cifarnet_convs(side=32):
  """(c_in, c_out, side) of each conv3x3 of cifarnet, in order (side: the conv's input = output size)."""
  convs = [(CIFARNET_IN, CIFARNET_STEM, side)]
  c = CIFARNET_STEM
  for w in CIFARNET_WIDTHS:
    convs.append((c, w, side))
    side //= 2  # the max pool after the block's first conv
    convs.append((w, w, side))
    c = w
  return convs


def cifarnet_conv_flops(batch):
  """FLOPs of the convolutions in one training step: forward, backward data (not for the first conv,
  whose input needs no gradient) and backward weights; 2 FLOPs per multiply-add."""
  total = 0.0
  for i, (ci, co, s) in enumerate(cifarnet_convs()):
    one = 2.0 * batch * s * s * co * ci * 9
    total += one * (2 if i == 0 else 3)
  return total


def time_calls(fn, iters, warmup):
  """Calls fn() `warmup` times, then `iters` times timed; fn must return only when its work is done.
  Returns the wall times in ms."""
  for _ in range(warmup):
    fn()
  ms = []
  for _ in range(iters):
    t0 = time.perf_counter()
    fn()
    ms.append((time.perf_counter() - t0) * 1e3)
  return ms


def median(xs):
  return statistics.median(xs) if xs else float("nan")


def _status_kib(key):
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(key + ":"):
        return int(line.split()[1])
  return 0


def rss_bytes():
  """Current resident set size of this process."""
  return _status_kib("VmRSS") * 1024


def peak_rss_bytes():
  """Peak resident set size (the high-water mark, resettable with reset_peak_rss)."""
  hwm = _status_kib("VmHWM")
  return hwm * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_rss():
  """Resets the high-water mark to the current RSS (Linux >= 4.0); False where not allowed."""
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
    return True
  except OSError:
    return False


def limit_threads(threads):
  """Pins this process to `threads` CPUs when fewer than it may use (before any framework is imported,
  so XLA's and OpenMP's pools are sized by it); sets the usual thread variables."""
  if not threads:
    return
  os.environ["OMP_NUM_THREADS"] = str(threads)
  os.environ["MKL_NUM_THREADS"] = str(threads)
  cpus = sorted(os.sched_getaffinity(0))
  if threads < len(cpus):
    os.sched_setaffinity(0, cpus[:threads])
  if threads == 1:
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
