"""The throughput laws a certificate stores: each fitted form, and both forms with the choice.

Fitted by :mod:`afford.fit.time.throughput` (docs/DESIGN.md section 4): ``power`` t = exp(a) n^b,
``floor_power`` t = F + c n^b, and the batch ladder's ``linear_floor`` t = F + c tokens. A law
predicts with the form it chose and says when a prediction is extrapolated.
"""

import math
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from afford.schema.quantities import Extent, Seconds

if TYPE_CHECKING:
    import numpy as np


class LawFit(BaseModel):
    """One fitted form. ``params``: a, b (power); F, c, b (floor_power); F, c (linear)."""

    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    form: Literal["power", "floor_power", "linear_floor"]
    params: dict[str, float]
    r2: float = Field(description="coefficient of determination in log space")
    residuals: list[float] = Field(description="relative: predicted / measured - 1")
    loo_rel_errors: list[float] | None = Field(
        None, description="leave-one-out: predicted without the point / measured - 1")

    @model_validator(mode="after")
    def _params_in_range(self) -> "LawFit":
        """The form's parameters, each in the range its fit can give (a hand-edited ``a`` of 1e6
        would make exp(a) overflow in every reader): ``a`` within +-700 (exp(a) finite), ``b``
        within [-8, 8] (the floor form's fit keeps it in [0, 4]), ``F`` and the floor form's
        ``c`` not negative, no parameter beyond 1e30."""
        need = _FORM_PARAMS[self.form]
        if set(self.params) != set(need):
            raise ValueError(f"a {self.form} law has the parameters {', '.join(need)}, "
                             f"not {', '.join(sorted(self.params)) or 'none'}")
        p = self.params
        for k, v in p.items():
            if not math.isfinite(v) or abs(v) > 1e30:
                raise ValueError(f"parameter {k} = {v!r} is out of range")
        if "a" in p and abs(p["a"]) > 700:
            raise ValueError(f"parameter a = {p['a']!r} is out of range [-700, 700]")
        low_b = 0.0 if self.form == "floor_power" else -8.0
        if "b" in p and not low_b <= p["b"] <= 8.0:
            raise ValueError(f"parameter b = {p['b']!r} is out of range [{low_b:g}, 8]")
        for k in ("F", "c") if self.form == "floor_power" else ("F",):
            if k in p and p[k] < 0:
                raise ValueError(f"parameter {k} = {p[k]!r} is negative")
        return self

    @property
    def loo_max(self) -> float | None:
        if not self.loo_rel_errors:
            return None
        return max(abs(e) for e in self.loo_rel_errors)

    def predict(self, x: "float | np.ndarray") -> "float | np.ndarray":
        return evaluate(self.form, self.params, x)


_FORM_PARAMS = {"power": ("a", "b"), "floor_power": ("F", "c", "b"), "linear_floor": ("F", "c")}


class Excluded(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    value: Extent
    reason: str


class ThroughputLaw(BaseModel):
    """Both forms over the same resident points, the chosen one, and what was left out."""

    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    x_name: str
    x: list[Extent]
    seconds: list[Seconds]
    x_min: Extent
    x_max: Extent
    power: LawFit
    floor_power: LawFit | None = None
    chosen: Literal["power", "floor_power"]
    excluded: list[Excluded] = []
    warnings: list[str] = []

    @property
    def best(self) -> LawFit:
        return self.floor_power if self.chosen == "floor_power" else self.power

    def predict(self, x: float) -> tuple[float, bool]:
        """Seconds at ``x`` with the chosen form, and whether ``x`` is extrapolated."""
        return float(self.best.predict(x)), not (self.x_min <= x <= self.x_max)

    def formula(self) -> str:
        """The chosen law, short: ``t = 1.98e-06 s^1.417`` (seconds)."""
        f = self.best
        if f.form == "power":
            return f"t = {math.exp(f.params['a']):.3g} {self.x_name}^{f.params['b']:.3f}"
        return (f"t = {f.params['F']:.3g} + {f.params['c']:.3g} "
                f"{self.x_name}^{f.params['b']:.3f}")

    def describe(self) -> str:
        f = self.best
        return (f"{self.formula()} ({self.chosen}, R^2 {f.r2:.4f}, "
                f"{self.x_name} in [{self.x_min:g}, {self.x_max:g}])")


def evaluate(form: str, p: dict[str, float], x):
    import numpy as np  # here: reading a certificate needs none until a law predicts

    x = np.asarray(x, dtype=float)
    if form == "power":
        y = np.exp(p["a"]) * x ** p["b"]
    elif form == "floor_power":
        y = p["F"] + p["c"] * x ** p["b"]
    else:
        y = p["F"] + p["c"] * x
    return float(y) if y.ndim == 0 else y
