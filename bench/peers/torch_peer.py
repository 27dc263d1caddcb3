# PyTorch versions of the compared workloads: eager NCHW ("nchw"), eager channels-last ("cl") and
# torch.compile on channels-last tensors ("compile", Inductor's default mode: generated C++/OpenMP
# kernels, oneDNN for convolutions). make(name, variant) returns a function that runs one iteration
# and returns when its results are computed (CPU eager is synchronous; loss.item() ends a step).
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import common

VARIANTS = ("nchw", "cl", "compile")


def versions():
  return {"torch": torch.__version__, "torch_threads": torch.get_num_threads(),
          "torch_mkldnn": torch.backends.mkldnn.is_available()}


def set_threads(threads):
  if threads:
    torch.set_num_threads(threads)


def _fmt(variant):
  return torch.contiguous_format if variant == "nchw" else torch.channels_last


def _randn(shape, variant, requires_grad=False):
  t = torch.randn(shape).contiguous(memory_format=_fmt(variant))
  return t.requires_grad_(requires_grad)


def _compiled(fn, variant):
  return torch.compile(fn, dynamic=False) if variant == "compile" else fn


def bn_relu(variant):
  """BatchNorm2d(train) + ReLU forward, and dx, dw, db for an upstream dy (no .grad accumulation)."""
  n, c, h, w = common.BN_SHAPE
  x = _randn((n, c, h, w), variant, True)
  dy = _randn((n, c, h, w), variant)
  bn = nn.BatchNorm2d(c, eps=common.BN_EPS, momentum=common.BN_MOMENTUM).train()
  with torch.no_grad():
    bn.weight.uniform_(0.5, 1.5)
    bn.bias.uniform_(-0.5, 0.5)
  fwd = _compiled(lambda t: F.relu(bn(t)), variant)

  def once():
    out = fwd(x)
    torch.autograd.grad(out, [x, bn.weight, bn.bias], dy)
  return once


def relu_backward(variant):
  """dx of ReLU: eager through autograd (aten threshold_backward); compiled: where(out > 0, dy, 0)."""
  shape = common.BN_SHAPE
  dy = _randn(shape, variant)
  if variant == "compile":
    return _relu_expr(variant, lambda o, d: torch.where(o > 0, d, 0.0))
  x = _randn(shape, variant, True)
  out = F.relu(x)
  return lambda: torch.autograd.grad(out, x, dy, retain_graph=True)


def _relu_expr(variant, expr):
  shape = common.BN_SHAPE
  with torch.no_grad():
    out = F.relu(_randn(shape, variant))
  dy = _randn(shape, variant)
  f = _compiled(expr, variant)

  def once():
    with torch.no_grad():
      f(out, dy)
  return once


def relu_backward_expr(variant):
  """dx = dy * (out > 0), the expression (eager: a compare, a cast and a multiply)."""
  return _relu_expr(variant, lambda o, d: d * (o > 0))


def _conv_inputs(variant):
  n, c, h, w = common.CONV_SHAPE
  x = _randn((n, c, h, w), variant)
  wt = (torch.randn(common.CONV_OUT, c, 3, 3) / (9.0 * c) ** 0.5).contiguous(memory_format=_fmt(variant))
  dy = _randn((n, common.CONV_OUT, h, w), variant)
  return x, wt, dy


def conv_forward(variant):
  x, wt, _ = _conv_inputs(variant)
  f = _compiled(lambda t, k: F.conv2d(t, k, padding=1), variant)

  def once():
    with torch.no_grad():
      f(x, wt)
  return once


def conv_forward_backward(variant):
  x, wt, dy = _conv_inputs(variant)
  x.requires_grad_(True)
  wt.requires_grad_(True)
  f = _compiled(lambda t, k: F.conv2d(t, k, padding=1), variant)

  def once():
    y = f(x, wt)
    torch.autograd.grad(y, [x, wt], dy)
  return once


class GlobalMaxPool2d(nn.Module):
  def forward(self, x):  # (N, C, H, W) -> (N, C)
    return x.amax(dim=(2, 3))


def cifarnet():
  """The cifarnet preset, layer for layer (see common.py)."""
  bn = lambda c: nn.BatchNorm2d(c, eps=common.BN_EPS, momentum=common.BN_MOMENTUM)
  conv = lambda ci, co: nn.Conv2d(ci, co, 3, padding=1, bias=False)
  layers = [conv(common.CIFARNET_IN, common.CIFARNET_STEM), bn(common.CIFARNET_STEM), nn.ReLU()]
  c = common.CIFARNET_STEM
  for w in common.CIFARNET_WIDTHS:
    layers += [conv(c, w), nn.MaxPool2d(2), bn(w), nn.ReLU(), conv(w, w), bn(w), nn.ReLU()]
    c = w
  layers += [GlobalMaxPool2d(), nn.Linear(c, common.CIFARNET_CLASSES)]
  return nn.Sequential(*layers)


class _ResidualBlock(nn.Module):
  """relu(body(x) + shortcut(x)): a resnet20 block (see common.py)."""

  def __init__(self, ci, co, stride):
    super().__init__()
    bn = lambda c: nn.BatchNorm2d(c, eps=common.BN_EPS, momentum=common.BN_MOMENTUM)
    self.body = nn.Sequential(nn.Conv2d(ci, co, 3, stride, 1, bias=False), bn(co), nn.ReLU(),
                              nn.Conv2d(co, co, 3, 1, 1, bias=False), bn(co))
    self.shortcut = (nn.Sequential(nn.Conv2d(ci, co, 1, stride, bias=False), bn(co))
                     if stride != 1 or ci != co else nn.Identity())

  def forward(self, x):
    return F.relu(self.body(x) + self.shortcut(x))


def resnet20():
  """The resnet20 preset, layer for layer (see common.py)."""
  c = common.RESNET20_WIDTHS[0]
  layers = [nn.Conv2d(common.CIFARNET_IN, c, 3, 1, 1, bias=False),
            nn.BatchNorm2d(c, eps=common.BN_EPS, momentum=common.BN_MOMENTUM), nn.ReLU()]
  for w in common.RESNET20_WIDTHS:
    for block in range(common.RESNET20_BLOCKS):
      layers.append(_ResidualBlock(c, w, 2 if block == 0 and w != common.RESNET20_WIDTHS[0] else 1))
      c = w
  layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, common.CIFARNET_CLASSES)]
  return nn.Sequential(*layers)


def cifarnet_step(variant, batch, bf16=False, net=cifarnet, label_smoothing=common.LABEL_SMOOTHING):
  """One training step as `aether bench step` does it: forward, loss (label smoothing), backward,
  SGD (Nesterov, weight decay), zero_grad, accuracy, loss.item(). bf16: the forward and the loss
  under torch.autocast("cpu", torch.bfloat16) (float32 weights), as aether's --precision bf16.
  net: the network (cifarnet, or resnet20 with its label smoothing)."""
  torch.manual_seed(0)
  model = net().train().to(memory_format=_fmt(variant))
  x = _randn((batch, common.CIFARNET_IN, 32, 32), variant)
  y = torch.randint(0, common.CIFARNET_CLASSES, (batch,))
  opt = torch.optim.SGD(model.parameters(), lr=common.LR, momentum=common.MOMENTUM, nesterov=True,
                        weight_decay=common.WEIGHT_DECAY)

  def fwd_loss(xb, yb):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
      out = model(xb)
      return out, F.cross_entropy(out, yb, label_smoothing=label_smoothing)

  fwd_loss = _compiled(fwd_loss, variant)
  opt_step = _compiled(opt.step, variant)

  def once():
    out, loss = fwd_loss(x, y)
    loss.backward()
    opt_step()
    opt.zero_grad(set_to_none=True)
    (out.detach().argmax(1) == y).float().mean()
    return loss.item()
  return once


def make(name, variant):
  assert variant in VARIANTS, variant
  if name.startswith("step-"):  # step-B or step-B-bf16
    parts = name.split("-")
    return cifarnet_step(variant, int(parts[1]), bf16=parts[2:] == ["bf16"])
  if name.startswith("resnet20-"):  # resnet20-B
    return cifarnet_step(variant, int(name.split("-")[1]), net=resnet20,
                         label_smoothing=common.RESNET20_LABEL_SMOOTHING)
  return {"bn-relu": bn_relu, "relu-backward": relu_backward, "relu-backward-expr": relu_backward_expr,
          "conv-forward": conv_forward, "conv-forward-backward": conv_forward_backward}[name](variant)
