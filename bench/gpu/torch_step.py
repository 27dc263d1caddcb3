#!/usr/bin/env python3
"""The cifarnet training step of `aether bench step --model cifarnet` in PyTorch, on the GPU.

The reference for scripts/gpu-check.sh's ratio. The network, loss and optimizer replicate
src/model/presets.cpp (cifarnet) and src/cli/bench_cmd.cpp (run_step) exactly:

  conv3x3(3->32, pad 1, no bias), BN(32), ReLU
  for w in 64, 128, 256:
    conv3x3(c->w), maxpool 2, BN(w), ReLU, conv3x3(w->w), BN(w), ReLU
  global max pool, linear(256 -> 10)
  cross entropy with label smoothing 0.2; SGD lr 0.1/25, momentum 0.9, nesterov, weight decay 5e-4
  (coupled, every parameter); BatchNorm momentum 0.1, eps 1e-5; accuracy computed; loss.item()
  read every step (aether's step does the same, so both synchronise once per step).

Random (B,32,32,3) images (channels-last memory) and labels, fixed per run. Modes:
  eager        float32, TF32 off (aether computes float32 in full float32 too)
  eager_tf32   PyTorch's default: cuDNN convolutions may use TF32 tensor cores
  compile      torch.compile of the model (TF32 off), if it works here

Prints one JSON object (and writes it to --out).
"""
import argparse
import json
import statistics
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F


class CifarNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU()]
        c = 32
        for w in (64, 128, 256):
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.MaxPool2d(2), nn.BatchNorm2d(w), nn.ReLU()]
            layers += [nn.Conv2d(w, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU()]
            c = w
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(256, classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.amax(x, dim=(2, 3))  # GlobalMaxPool2d
        return self.fc(x)


def set_tf32(on):
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def time_steps(mode, batch, runs, warmup):
    torch.manual_seed(0)
    set_tf32(mode == "eager_tf32")
    torch.backends.cudnn.benchmark = False  # like aether: cuDNN's heuristics, no autotuning
    dev = torch.device("cuda")
    model = CifarNet().to(dev).to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1 / 25, momentum=0.9, nesterov=True, weight_decay=5e-4)
    fwd = torch.compile(model, dynamic=False) if mode == "compile" else model
    x = torch.randn(batch, 32, 32, 3, device=dev).permute(0, 3, 1, 2)  # NCHW view of NHWC memory
    labels = torch.randint(0, 10, (batch,), device=dev)

    def step():
        out = fwd(x)
        loss = F.cross_entropy(out, labels, label_smoothing=0.2)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        _ = (out.detach().argmax(1) == labels).float().mean()
        return loss.item()

    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    ms = []
    loss = 0.0
    for _ in range(runs):
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss = step()  # ends with loss.item(): synchronised
        ms.append((time.perf_counter() - t) * 1e3)
    med = statistics.median(ms)
    return {
        "mode": mode,
        "batch": batch,
        "median_ms": med,
        "min_ms": min(ms),
        "max_ms": max(ms),
        "runs": runs,
        "images_per_s": batch / (med * 1e-3),
        "warmup_s": warm_s,
        "last_loss": loss,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=["eager", "eager_tf32", "compile"])
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"benchmark": "torch_step", "error": "torch sees no CUDA GPU"}))
        return 1
    res = {
        "benchmark": "torch_step",
        "model": "cifarnet",
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "results": [],
        "errors": {},
    }
    for mode in a.modes:
        for b in a.batch:
            try:
                res["results"].append(time_steps(mode, b, a.runs, a.warmup if mode != "compile" else max(a.warmup, 3)))
            except Exception as e:  # torch.compile may not work on every machine: report, go on
                res["errors"][f"{mode}/{b}"] = f"{type(e).__name__}: {e}"
                traceback.print_exc(file=sys.stderr)
                if mode == "compile":
                    break
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
