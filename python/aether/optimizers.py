"""Optimizers: Aether-ML's Adam and AdamW, and aether's SGD (momentum, Nesterov). Each takes a
learning-rate schedule ("constant", "one_cycle", "warmup_linear", "cosine", "step", "triangle") whose
peak is lr, and optional gradient clipping by global norm. "triangle" rises linearly from
lr * lr_start_factor to lr over warmup_fraction of the steps, then falls to lr * lr_end_factor."""

from __future__ import annotations

import numbers
from typing import Any, Dict, Iterable, Optional

import numpy as np


class Optimizer:
    def __new__(cls, *args: Any, **kwargs: Any) -> "Optimizer":
        # PyTorch's form, SGD(model.parameters(), lr=0.1), would read the parameters as lr (and fail
        # as "got multiple values for argument 'lr'"): say what to write instead.
        if args and not isinstance(args[0], numbers.Real):
            name = cls.__name__
            raise TypeError(f"{name}: the first argument is lr, got {type(args[0]).__name__}: aether's optimizers "
                            f"take their settings, as Keras' (ae.{name}(lr=0.1)); to step tensors of your own, "
                            f"build one over them: opt = ae.{name}(lr=0.1).build(params), then opt.step() and "
                            f"opt.zero_grad() as in PyTorch")
        return super().__new__(cls)

    def __init__(self, lr: float, weight_decay: float, schedule: str, warmup_fraction: float,
                 clip_grad_norm: float):
        if not isinstance(lr, numbers.Real) or isinstance(lr, (bool, np.bool_)):
            raise TypeError(f"lr must be a number, got {type(lr).__name__}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.lr, self.weight_decay = float(lr), float(weight_decay)
        self.schedule, self.warmup_fraction, self.clip_grad_norm = schedule, float(warmup_fraction), float(clip_grad_norm)
        self.lr_start_factor, self.lr_end_factor = 0.0, 0.0

    def triangle(self, start_factor: float, end_factor: float) -> "Optimizer":
        """The "triangle" schedule's ends, as fractions of lr (airbench: 0.2 and 0.07)."""
        self.schedule, self.lr_start_factor, self.lr_end_factor = "triangle", float(start_factor), float(end_factor)
        return self

    def build(self, parameters: Iterable[Any], total_steps: Optional[int] = None) -> Any:
        """This optimizer over `parameters` (e.g. model.parameters()) for a training loop of one's own:

            opt = ae.SGD(lr=0.1, momentum=0.9).build(model.parameters())
            loss = ae.functional.cross_entropy(model(x), y); loss.backward(); opt.step(); opt.zero_grad()

        `opt.lr` may be set between steps. A schedule other than "constant" needs total_steps, the
        number of steps it spans: each step() then takes its rate from it, as Model.train's steps
        would. clip_grad_norm is Model.train's (call ae.clip_grad_norm before step()), and is
        refused here rather than ignored."""
        from ._aether import Tensor, _build_optimizer
        params = list(parameters)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__}.build: parameter {i} is a {type(p).__name__}, not a Tensor")
        if total_steps is not None and (not isinstance(total_steps, int) or total_steps < 1):
            raise ValueError(f"{type(self).__name__}.build: total_steps must be a positive int, got {total_steps!r}")
        return _build_optimizer(self.config(), params, total_steps or 0)

    def config(self) -> Dict[str, Any]:
        return {"lr": self.lr, "weight_decay": self.weight_decay, "schedule": self.schedule,
                "warmup_fraction": self.warmup_fraction, "clip_grad_norm": self.clip_grad_norm,
                "lr_start_factor": self.lr_start_factor, "lr_end_factor": self.lr_end_factor}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class SGD(Optimizer):
    def __init__(self, lr: float = 0.01, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0,
                 schedule: str = "constant", warmup_fraction: float = 0.2, clip_grad_norm: float = 0.0):
        super().__init__(lr, weight_decay, schedule, warmup_fraction, clip_grad_norm)
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    def config(self):
        return {**super().config(), "optimizer": "sgd", "momentum": self.momentum, "nesterov": self.nesterov}


class Adam(Optimizer):
    """Adam; weight_decay is added to the gradient (L2), as in Aether-ML and PyTorch."""

    _name = "adam"

    def __init__(self, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0, schedule: str = "constant", warmup_fraction: float = 0.2,
                 clip_grad_norm: float = 0.0):
        super().__init__(lr, weight_decay, schedule, warmup_fraction, clip_grad_norm)
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)

    def config(self):
        return {**super().config(), "optimizer": self._name, "beta1": self.beta1, "beta2": self.beta2,
                "eps": self.eps}


class AdamW(Adam):
    """Adam with decoupled weight decay."""

    _name = "adamw"

    def __init__(self, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.01, schedule: str = "constant", warmup_fraction: float = 0.2,
                 clip_grad_norm: float = 0.0):
        super().__init__(lr, beta1, beta2, eps, weight_decay, schedule, warmup_fraction, clip_grad_norm)


class Muon(Optimizer):
    """Muon (airbench94_muon's): Nesterov momentum orthogonalised by ns_steps Newton-Schulz
    iterations, for parameters of 2 or more dims (conv filters, matrices); normalize_weights scales
    each weight to Frobenius norm sqrt(rows) before its step. Alone it needs every trained parameter
    to have 2 or more dims; usually it trains a parameter group of another optimizer's model:
    configure(SGD(...), param_groups=[{"match": "*.weight", "layer": "Conv2d", "optimizer": Muon(...)}])
    (the group then takes this lr, momentum and weight decay; nesterov must be the main optimizer's)."""

    def __init__(self, lr: float = 0.02, momentum: float = 0.95, nesterov: bool = True, ns_steps: int = 5,
                 normalize_weights: bool = False, weight_decay: float = 0.0, schedule: str = "constant",
                 warmup_fraction: float = 0.2, clip_grad_norm: float = 0.0):
        super().__init__(lr, weight_decay, schedule, warmup_fraction, clip_grad_norm)
        self.momentum, self.nesterov = float(momentum), bool(nesterov)
        self.ns_steps, self.normalize_weights = int(ns_steps), bool(normalize_weights)

    def config(self):
        return {**super().config(), "optimizer": "muon", "momentum": self.momentum, "nesterov": self.nesterov,
                "muon_ns_steps": self.ns_steps, "muon_normalize_weights": self.normalize_weights}
