#!/usr/bin/env python3
"""airbench94 / airbench93 (Keller Jordan, github.com/KellerJordan/cifar10-airbench) ported to
PyTorch on the CPU, to be measured side by side with `aether train --model airbench94`.

The recipe is the published one (airbench94.py, airbench/lib_airbench93.py): the same network,
hyperparameters (per-1024-example lr 11.5, wd 0.0153, momentum 0.85, bias scaler 64, summed loss
with label smoothing 0.2, triangle schedule 0.2 -> 1 -> 0.07 peaking at 23% of the steps), frozen
whitening filters from the first 5000 training images, whitening bias trained for 3 epochs,
BatchNorm momentum 0.6 / eps 1e-12 with frozen weights, lookahead from epoch 3 every 5 steps,
alternating flips, 2-pixel reflect-padded translations and TTA over flips and one-pixel
translations. What the CPU changes: float32 instead of half (CPU half convs are slow or missing),
channels-last tensors on the CPU, torch.set_num_threads(--threads), and the data read from the
CIFAR-10 binary batches (xz) in ../shared/data/cifar-10 rather than torchvision's download.

  python3 bench/airbench_torch.py --variant 94 --threads 2 --json out.json
  python3 bench/airbench_torch.py --variant 94 --epochs 1 --max-steps 6 --no-eval  # step-time sample

Prints one line per epoch (seconds, training and test accuracy) and the TTA accuracy at the end;
--json writes the same with the whole process's wall time.
"""
import argparse
import json
import lzma
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
CIFAR_MEAN = torch.tensor((0.4914, 0.4822, 0.4465))
CIFAR_STD = torch.tensor((0.2470, 0.2435, 0.2616))


def read_cifar(data_dir, names):
    """(N,3,32,32) uint8 images and (N,) int64 labels from CIFAR-10 binary batches (.bin or .bin.xz)."""
    images, labels = [], []
    for name in names:
        path = os.path.join(data_dir, name + ".bin")
        raw = open(path, "rb").read() if os.path.exists(path) else lzma.open(path + ".xz").read()
        rec = np.frombuffer(raw, np.uint8).reshape(-1, 1 + 3 * 32 * 32)
        labels.append(rec[:, 0].astype(np.int64))
        images.append(rec[:, 1:].reshape(-1, 3, 32, 32))
    return torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels))


def hyp(variant):
    return {"epochs": 9.9 if variant == 94 else 11.0, "widths": (64, 256, 256) if variant == 94 else (64, 128, 128),
            "batch_size": 1024, "lr": 11.5, "momentum": 0.85, "weight_decay": 0.0153, "bias_scaler": 64.0,
            "label_smoothing": 0.2, "whiten_bias_epochs": 3, "translate": 2, "bn_momentum": 0.6,
            "scaling_factor": 1 / 9}


class Loader:
    """airbench's CifarLoader: normalise once, flip every image at random in epoch 0 and all of them
    on odd epochs, random 2-pixel translations of the reflect-padded images each epoch."""

    def __init__(self, images, labels, batch_size, train, translate=0, seed=0):
        self.images = ((images.float() / 255 - CIFAR_MEAN.view(1, 3, 1, 1)) / CIFAR_STD.view(1, 3, 1, 1)).contiguous(
            memory_format=torch.channels_last)
        self.labels, self.batch_size, self.train, self.translate = labels, batch_size, train, translate
        self.epoch, self.gen = 0, torch.Generator().manual_seed(seed)
        if train:
            flip = torch.rand(len(images), generator=self.gen) < 0.5
            self.images = torch.where(flip.view(-1, 1, 1, 1), self.images.flip(-1), self.images)
            if translate:
                self.padded = F.pad(self.images, (translate,) * 4, "reflect")

    def __len__(self):
        return len(self.images) // self.batch_size if self.train else math.ceil(len(self.images) / self.batch_size)

    def __iter__(self):
        images = self.images
        if self.train and self.translate:
            r = self.translate
            shifts = torch.randint(-r, r + 1, (len(images), 2), generator=self.gen)
            images = torch.empty_like(self.images)
            for sy in range(-r, r + 1):
                for sx in range(-r, r + 1):
                    m = (shifts[:, 0] == sy) & (shifts[:, 1] == sx)
                    images[m] = self.padded[m, :, r + sy:r + sy + 32, r + sx:r + sx + 32]
        if self.train and self.epoch % 2 == 1:
            images = images.flip(-1)
        self.epoch += 1
        order = torch.randperm(len(images), generator=self.gen) if self.train else torch.arange(len(images))
        for i in range(len(self)):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            yield images[idx].contiguous(memory_format=torch.channels_last), self.labels[idx]


class BatchNorm(nn.BatchNorm2d):
    def __init__(self, c, momentum):
        super().__init__(c, eps=1e-12, momentum=1 - momentum)
        self.weight.requires_grad = False


class Conv(nn.Conv2d):
    def __init__(self, cin, cout, kernel_size=3, padding="same", bias=False):
        super().__init__(cin, cout, kernel_size=kernel_size, padding=padding, bias=bias)

    def reset_parameters(self):
        super().reset_parameters()
        if self.bias is not None:
            self.bias.data.zero_()
        w = self.weight.data
        torch.nn.init.dirac_(w[:w.size(1)])


class ConvGroup(nn.Module):
    def __init__(self, cin, cout, bn_momentum):
        super().__init__()
        self.conv1, self.pool, self.norm1 = Conv(cin, cout), nn.MaxPool2d(2), BatchNorm(cout, bn_momentum)
        self.conv2, self.norm2, self.activ = Conv(cout, cout), BatchNorm(cout, bn_momentum), nn.GELU()

    def forward(self, x):
        x = self.activ(self.norm1(self.pool(self.conv1(x))))
        return self.activ(self.norm2(self.conv2(x)))


class Mul(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s

    def forward(self, x):
        return x * self.s


def make_net(h):
    w1, w2, w3 = h["widths"]
    net = nn.Sequential(Conv(3, 24, kernel_size=2, padding=0, bias=True), nn.GELU(),
                        ConvGroup(24, w1, h["bn_momentum"]), ConvGroup(w1, w2, h["bn_momentum"]),
                        ConvGroup(w2, w3, h["bn_momentum"]), nn.MaxPool2d(3), nn.Flatten(),
                        nn.Linear(w3, 10, bias=False), Mul(h["scaling_factor"]))
    net[0].weight.requires_grad = False
    return net.to(memory_format=torch.channels_last)


def init_whitening(layer, images, eps=5e-4):
    c, (kh, kw) = images.shape[1], layer.weight.shape[2:]
    patches = images.unfold(2, kh, 1).unfold(3, kw, 1).transpose(1, 3).reshape(-1, c, kh, kw).float()
    flat = patches.view(len(patches), -1)
    evals, evecs = torch.linalg.eigh(flat.T @ flat / len(flat), UPLO="U")
    evals, evecs = evals.flip(0).view(-1, 1, 1, 1), evecs.T.reshape(c * kh * kw, c, kh, kw).flip(0)
    scaled = evecs / torch.sqrt(evals + eps)
    layer.weight.data[:] = torch.cat((scaled, -scaled))


class Lookahead:
    def __init__(self, net):
        self.ema = {k: v.clone() for k, v in net.state_dict().items()}

    def update(self, net, decay):
        for e, p in zip(self.ema.values(), net.state_dict().values()):
            if p.dtype in (torch.half, torch.float):
                e.lerp_(p, 1 - decay)
                p.copy_(e)


def tta_logits(net, images, level=2):
    def mirror(x):
        return 0.5 * net(x) + 0.5 * net(x.flip(-1))
    out = []
    for x in images.split(2000):
        if level == 0:
            out.append(net(x))
            continue
        logits = mirror(x)
        if level == 2:
            p = F.pad(x, (1,) * 4, "reflect")
            shifted = [p[:, :, 0:32, 0:32], p[:, :, 2:34, 2:34]]
            logits = 0.5 * logits + 0.5 * torch.stack([mirror(s.contiguous(memory_format=torch.channels_last))
                                                       for s in shifted]).mean(0)
        out.append(logits)
    return torch.cat(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", type=int, choices=(93, 94), default=94)
    ap.add_argument("--data-dir", default=os.path.join(HERE, "..", "..", "shared", "data", "cifar-10"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=float, default=None, help="default: the recipe's (9.9 / 11)")
    ap.add_argument("--max-steps", type=int, default=0, help="> 0: stop each epoch after this many steps")
    ap.add_argument("--no-eval", action="store_true", help="time training only: no test evaluation")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    t_start = time.perf_counter()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    h = hyp(a.variant)
    if a.epochs is not None:
        h["epochs"] = a.epochs
    train_x, train_y = read_cifar(a.data_dir, [f"data_batch_{i}" for i in range(1, 6)])
    test_x, test_y = read_cifar(a.data_dir, ["test_batch"])
    train = Loader(train_x, train_y, h["batch_size"], True, h["translate"], a.seed)
    test = Loader(test_x, test_y, 2000, False)

    bs, momentum = h["batch_size"], h["momentum"]
    kilostep_scale = 1024 * (1 + 1 / (1 - momentum))
    lr = h["lr"] / kilostep_scale
    wd = h["weight_decay"] * bs / kilostep_scale
    lr_biases = lr * h["bias_scaler"]
    loss_fn = nn.CrossEntropyLoss(label_smoothing=h["label_smoothing"], reduction="none")
    steps_per_epoch = min(len(train), a.max_steps) if a.max_steps else len(train)
    total_steps = math.ceil(steps_per_epoch * h["epochs"])
    peak = int(0.23 * total_steps)

    def triangle(i):
        return 0.2 + 0.8 * i / peak if i < peak else 1 + (0.07 - 1) * (min(i, total_steps) - peak) / (total_steps - peak)

    net = make_net(h)
    norm_biases = [p for k, p in net.named_parameters() if "norm" in k and p.requires_grad]
    others = [p for k, p in net.named_parameters() if "norm" not in k and p.requires_grad]
    opt = torch.optim.SGD([dict(params=norm_biases, lr=lr_biases, weight_decay=wd / lr_biases),
                           dict(params=others, lr=lr, weight_decay=wd / lr)], momentum=momentum, nesterov=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, triangle)
    # The whitening filters from the first 5000 training images, normalised, unflipped.
    init_whitening(net[0], (train_x[:5000].float() / 255 - CIFAR_MEAN.view(1, 3, 1, 1)) / CIFAR_STD.view(1, 3, 1, 1))
    lookahead, step, epochs_out = None, 0, []
    for epoch in range(math.ceil(h["epochs"])):
        net[0].bias.requires_grad = epoch < h["whiten_bias_epochs"]
        t0 = time.perf_counter()
        net.train()
        correct = seen = 0
        for i, (x, y) in enumerate(train):
            if a.max_steps and i >= a.max_steps:
                break
            out = net(x)
            loss = loss_fn(out, y).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            correct += int((out.detach().argmax(1) == y).sum())
            seen += len(y)
            if epoch >= 3 and step % 5 == 0:
                if lookahead is None:
                    lookahead = Lookahead(net)
                else:
                    lookahead.update(net, decay=0.95 ** 5 * (step / total_steps) ** 3)
            if step >= total_steps:
                break
        if lookahead is not None:
            lookahead.update(net, decay=1.0)
        secs = time.perf_counter() - t0
        net.eval()
        with torch.no_grad():
            val = float("nan") if a.no_eval else float((tta_logits(net, test.images, 0).argmax(1) == test_y).float().mean())
        epochs_out.append({"epoch": epoch + 1, "seconds": secs, "steps": i + 1,
                           "train_accuracy": correct / max(seen, 1), "val_accuracy": val})
        print(f"epoch {epoch + 1}: {secs:.1f} s ({seen / secs:.0f} img/s), train acc {correct / max(seen, 1):.4f}, "
              f"test acc {val:.4f}", flush=True)
    net.eval()
    with torch.no_grad():
        tta = float("nan") if a.no_eval else float((tta_logits(net, test.images, 2).argmax(1) == test_y).float().mean())
    wall = time.perf_counter() - t_start
    print(f"airbench{a.variant} torch {torch.__version__}, {a.threads} threads: test accuracy "
          f"{epochs_out[-1]['val_accuracy']:.4f}, with TTA {tta:.4f}; {wall:.1f} s in all", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"variant": a.variant, "torch": torch.__version__, "threads": a.threads, "seed": a.seed,
                       "epochs": epochs_out, "test_accuracy": epochs_out[-1]["val_accuracy"],
                       "test_accuracy_tta": tta, "seconds": wall}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
