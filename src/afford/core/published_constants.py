"""Published constants that plans use, loaded from the data files that cite them.

``data/`` holds every data file of the package (:data:`DATA`). ``data/scaling.toml``: the
Chinchilla tokens-per-parameter ratio, the Besiroglu et al. 2024 refit of the Chinchilla
loss law, and ZeRO's bytes of model state per parameter. ``data/memory_defaults.toml``:
the memory law's constants measured by afford's own memory stage on one reference GPU (its
``[source]`` table names the device, date and commit; INHERITED by other boxes).
``data/process_spread.toml``: how much a launch-floor step differs between processes over
recorded certificates, the prior of the floor's band (``benches/process_spread.py``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from afford.core.errors import InputError
from afford.core.io import tomllib
from afford.core.units import MIN_FRACTION, UnitError, bounded

DATA = Path(__file__).parents[1] / "data"  # the package's data files, each value with its citation
MEMORY_DEFAULTS = DATA / "memory_defaults.toml"
PROCESS_SPREAD = DATA / "process_spread.toml"
MODES = ("fp32", "bf16", "fp16")  # dtype modes of a training step: fp32, bf16 or fp16 autocast

# The budget a run may fill: device memory x this share (docs/DESIGN.md section 4, cost
# model). Plans, the ladder, ``afford size`` and the memory stage's verdicts budget against it.
MEMORY_FRACTION = 0.90
MEMORY_FRACTION_REASON = ("afford's default budget fraction: 10 % of the card left for "
                          "allocator fragmentation, the CUDA context and other processes")


def check_fraction(value: float, what: str = "") -> float:
    """``value`` when it is a fraction in [:data:`~afford.core.units.MIN_FRACTION`, 1] (a budget
    of less than a millionth of the device leaves the floats when divided by); else an
    InputError (a ValueError, so a pydantic validator reports it as a field error) naming
    ``what``."""
    try:
        return bounded(value, what or "fraction", low=MIN_FRACTION, high=1.0, low_open=False)
    except UnitError:
        raise InputError(f"{what + ': ' if what else ''}{value!r} is not a fraction in "
                         f"[{MIN_FRACTION:g}, 1]") from None


@dataclass(frozen=True)
class LossLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta (nats per token)."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    citation: str

    def loss(self, params: float, tokens: float) -> float:
        return self.E + self.A / params ** self.alpha + self.B / tokens ** self.beta


@dataclass(frozen=True)
class Offload:
    """Bytes per parameter of optimizer-state offload, in the two accountings the ladder
    uses (data/scaling.toml, [offload])."""

    citation: str
    zero_device_bytes_per_param: float
    zero_link_bytes_per_param: float
    fp32_offloaded_bytes_per_param: float
    fp32_link_bytes_per_param: float


@dataclass(frozen=True)
class ReferencePoint:
    """Throughput measured elsewhere, with its citation (INHERITED, never pooled)."""

    device: str
    params: float
    tokens_per_second: float
    mode: str
    citation: str
    seq: int | None = None


@dataclass(frozen=True)
class ScalingConstants:
    tokens_per_param: float
    tokens_per_param_citation: str
    loss_law: LossLaw
    state_bytes_per_param: float
    state_bytes_citation: str
    offload: Offload | None = None
    references: tuple[ReferencePoint, ...] = ()


@lru_cache(maxsize=1)
def load_scaling() -> ScalingConstants:
    raw = tomllib.loads((DATA / "scaling.toml").read_text(encoding="utf-8"))
    b = raw["besiroglu2024"]
    return ScalingConstants(
        tokens_per_param=float(raw["chinchilla"]["tokens_per_param"]),
        tokens_per_param_citation=raw["chinchilla"]["citation"],
        loss_law=LossLaw(E=b["E"], A=b["A"], B=b["B"], alpha=b["alpha"], beta=b["beta"],
                         citation=b["citation"]),
        state_bytes_per_param=float(raw["states"]["bytes_per_param"]),
        state_bytes_citation=raw["states"]["citation"],
        offload=Offload(**raw["offload"]) if "offload" in raw else None,
        references=tuple(ReferencePoint(**r) for r in raw.get("reference", [])))


def load_memory_defaults(path: Path = MEMORY_DEFAULTS) -> dict:
    """The inherited memory defaults as a dict; empty (with a warning) when unreadable."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        warnings.warn(f"cannot read the inherited memory defaults {path}: {exc}", stacklevel=2)
        return {}


@lru_cache(maxsize=1)
def load_process_spread() -> tuple[float, float, float]:
    """(sd, dof, session_sd) of data/process_spread.toml's prior: the standard deviation of
    a log host-bound step between processes over recorded certificates, the degrees of
    freedom it weighs as (Smyth 2004's d0; ``inf``: every certificate alike), and that of a
    certificate's mean step between certificates minutes apart (0 where the file has
    none)."""
    raw = tomllib.loads(PROCESS_SPREAD.read_text(encoding="utf-8"))["prior"]
    return float(raw["sd"]), float(raw["dof"]), float(raw.get("session_sd", 0.0))
