# JAX (XLA on the CPU) versions of the compared workloads, each one jax.jit'ed function on NHWC
# arrays (conv weights HWIO). make(name) returns a function that runs one iteration and blocks until
# its results are ready; a training step returns float(loss), as `aether bench step` reads the loss.
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import common

_DN = ("NHWC", "HWIO", "NHWC")


def versions():
  import jaxlib
  return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "jax_devices": [str(d) for d in jax.devices()]}


def _randn(rng, shape):
  return jnp.asarray(rng.standard_normal(shape, dtype=np.float32))


def _nhwc(shape):  # (N, C, H, W) -> (N, H, W, C)
  n, c, h, w = shape
  return (n, h, w, c)


def _bn_train(x, g, b, rm, rv):
  """BatchNorm2d training on x (N,H,W,C): normalised with the batch's biased variance; running
  statistics updated with the unbiased one (as PyTorch and aether)."""
  mean = jnp.mean(x, axis=(0, 1, 2))
  var = jnp.var(x, axis=(0, 1, 2))
  y = (x - mean) * lax.rsqrt(var + common.BN_EPS) * g + b
  count = x.size // x.shape[-1]
  m = common.BN_MOMENTUM
  return y, ((1 - m) * rm + m * lax.stop_gradient(mean),
             (1 - m) * rv + m * lax.stop_gradient(var) * (count / (count - 1)))


def _block(tree):
  jax.block_until_ready(tree)
  return tree


def bn_relu():
  rng = np.random.default_rng(0)
  shape = _nhwc(common.BN_SHAPE)
  c = shape[-1]
  x, dy = _randn(rng, shape), _randn(rng, shape)
  g = jnp.asarray(rng.uniform(0.5, 1.5, c).astype(np.float32))
  b = jnp.asarray(rng.uniform(-0.5, 0.5, c).astype(np.float32))
  rm, rv = jnp.zeros(c), jnp.ones(c)

  @jax.jit
  def f(x, g, b, rm, rv, dy):
    def fwd(x, g, b):
      y, stats = _bn_train(x, g, b, rm, rv)
      return jax.nn.relu(y), stats
    out, vjp, stats = jax.vjp(fwd, x, g, b, has_aux=True)
    return (out, stats) + vjp(dy)

  return lambda: _block(f(x, g, b, rm, rv, dy))


def relu_backward():
  """dx = where(out > 0, dy, 0) (what jax.grad of relu gives)."""
  rng = np.random.default_rng(0)
  shape = _nhwc(common.BN_SHAPE)
  out = jax.nn.relu(_randn(rng, shape))
  dy = _randn(rng, shape)
  f = jax.jit(lambda o, d: jnp.where(o > 0, d, 0.0))
  return lambda: _block(f(out, dy))


def _conv(x, w):
  return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=_DN)


def _conv_inputs():
  rng = np.random.default_rng(0)
  n, c, h, w = common.CONV_SHAPE
  x = _randn(rng, (n, h, w, c))
  wt = _randn(rng, (3, 3, c, common.CONV_OUT)) / (9.0 * c) ** 0.5
  dy = _randn(rng, (n, h, w, common.CONV_OUT))
  return x, wt, dy


def conv_forward():
  x, wt, _ = _conv_inputs()
  f = jax.jit(_conv)
  return lambda: _block(f(x, wt))


def conv_forward_backward():
  x, wt, dy = _conv_inputs()

  @jax.jit
  def f(x, wt, dy):
    y, vjp = jax.vjp(_conv, x, wt)
    return (y,) + vjp(dy)
  return lambda: _block(f(x, wt, dy))


def cifarnet_init(rng):
  """Parameters (conv weights HWIO, He-uniform like PyTorch's default scale; BN gamma 1, beta 0;
  linear) and BN running statistics of cifarnet (see common.py)."""
  convs, bns, stats = [], [], []
  for ci, co, _ in common.cifarnet_convs():
    bound = (1.0 / (9 * ci)) ** 0.5
    convs.append(jnp.asarray(rng.uniform(-bound, bound, (3, 3, ci, co)).astype(np.float32)))
    bns.append((jnp.ones(co), jnp.zeros(co)))
    stats.append((jnp.zeros(co), jnp.ones(co)))
  c, k = common.CIFARNET_WIDTHS[-1], common.CIFARNET_CLASSES
  bound = (1.0 / c) ** 0.5
  fc = (jnp.asarray(rng.uniform(-bound, bound, (c, k)).astype(np.float32)),
        jnp.asarray(rng.uniform(-bound, bound, k).astype(np.float32)))
  return {"conv": convs, "bn": bns, "fc": fc}, stats


def _maxpool2(x):  # (N,H,W,C) -> (N,H/2,W/2,C)
  return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def cifarnet_forward(params, stats, x):
  """Logits (N, K) and the new BN running statistics; x (N,32,32,3)."""
  new_stats = []

  def conv_bn_relu(h, i, pool):
    h = _conv(h, params["conv"][i])
    if pool:
      h = _maxpool2(h)
    h, st = _bn_train(h, *params["bn"][i], *stats[i])
    new_stats.append(st)
    return jax.nn.relu(h)

  h = conv_bn_relu(x, 0, False)
  for blk in range(len(common.CIFARNET_WIDTHS)):
    h = conv_bn_relu(h, 1 + 2 * blk, True)
    h = conv_bn_relu(h, 2 + 2 * blk, False)
  h = jnp.max(h, axis=(1, 2))  # global max pool (N, C)
  w, b = params["fc"]
  return h @ w + b, new_stats


def _loss(params, stats, x, y):
  logits, new_stats = cifarnet_forward(params, stats, x)
  k = common.CIFARNET_CLASSES
  ls = common.LABEL_SMOOTHING
  target = jax.nn.one_hot(y, k) * (1 - ls) + ls / k
  loss = -jnp.mean(jnp.sum(target * jax.nn.log_softmax(logits), axis=-1))
  return loss, (logits, new_stats)


@functools.partial(jax.jit, donate_argnums=(0, 1, 2))
def cifarnet_train_step(params, momentum, stats, x, y):
  """forward, loss, backward, SGD with Nesterov momentum and (coupled) weight decay, accuracy."""
  (loss, (logits, new_stats)), grads = jax.value_and_grad(_loss, has_aux=True)(params, stats, x, y)
  grads = jax.tree_util.tree_map(lambda g, p: g + common.WEIGHT_DECAY * p, grads, params)
  momentum = jax.tree_util.tree_map(lambda m, g: common.MOMENTUM * m + g, momentum, grads)
  upd = jax.tree_util.tree_map(lambda g, m: g + common.MOMENTUM * m, grads, momentum)
  params = jax.tree_util.tree_map(lambda p, u: p - common.LR * u, params, upd)
  acc = jnp.mean(jnp.argmax(logits, -1) == y)
  return params, momentum, new_stats, loss, acc


def cifarnet_step(batch):
  rng = np.random.default_rng(0)
  params, stats = cifarnet_init(rng)
  momentum = jax.tree_util.tree_map(jnp.zeros_like, params)
  x = _randn(rng, (batch, 32, 32, common.CIFARNET_IN))
  y = jnp.asarray(rng.integers(0, common.CIFARNET_CLASSES, batch))
  state = [params, momentum, stats]

  def once():
    p, m, s, loss, _acc = cifarnet_train_step(state[0], state[1], state[2], x, y)
    state[:] = [p, m, s]
    return float(loss)
  return once


def make(name, variant="jit"):
  if name.startswith("step-"):
    if name.endswith("-bf16"):
      raise ValueError("the bfloat16 step is not measured in JAX")
    return cifarnet_step(int(name.split("-")[1]))
  if name.startswith("resnet20-"):
    raise ValueError("the resnet20 step is not measured in JAX")
  return {"bn-relu": bn_relu, "relu-backward": relu_backward, "relu-backward-expr": relu_backward,
          "conv-forward": conv_forward, "conv-forward-backward": conv_forward_backward}[name]()
