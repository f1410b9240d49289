"""Workloads defined in the test suite, loaded as ``tests.user_workload:factory``."""

from __future__ import annotations

import torch
from torch import nn

from afford.workloads.base import Built, Workload


class MLP(Workload):
    name = "mlp"
    sweep_param = "width"
    description = "a two-layer MLP, the test suite's user workload"

    def default_sweep(self, device_class):
        return [16, 32]

    def shape(self, value):
        return {"batch": 8, "width": int(value)}

    def build(self, shape, device, seed):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(16, shape["width"]), nn.ReLU(),
                              nn.Linear(shape["width"], 1)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(shape["batch"], 16, device=device)
        return Built(model=model, optimizer=opt, loss=lambda: model(x).square().mean(),
                     tokens_per_step=shape["batch"])


class NoBackward(MLP):
    """Half the model never sees the loss: its step is not a whole training step."""

    name = "nobackward"

    def build(self, shape, device, seed):
        built = super().build(shape, device, seed)
        first = built.model[0]
        x = torch.randn(shape["batch"], 16, device=device)
        built.loss = lambda: first(x).square().mean()
        return built


class Narrow(MLP):
    """The MLP with its hidden layer halved: an arm for ``afford levers --arm``."""

    name = "narrow"

    def shape(self, value):
        return {"batch": 8, "width": max(1, int(value) // 2)}


def factory():
    return MLP()


def narrow():
    return Narrow()


def no_backward():
    return NoBackward()


def not_a_workload():
    return object()
