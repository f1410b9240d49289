"""A workload's step-time features as a certificate stores them: how a step's counted work
(tokens, GEMM FLOPs, attention FLOPs) grows with its shape.

Fitted by :mod:`afford.fit.time.step_features` (the menu of monomials and why the laws are
exact, not fits); kept here, below the fit layer, so that reading a stored model at any shape
(:func:`afford.schema.time_law.predict_at`) needs neither the fit nor scipy.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.schema.quantities import Extent, Flops

Axes = Literal["batch_seq", "n"]
FEATURES = ("tokens", "gemm_flops", "attn_flops")


def seq_tokens(batch: float | None, seq: float | None) -> float | None:
    """B*s^2: the shape-only stand-in for attention work where attention FLOPs were not
    counted (the step-time model's ``seq_tokens`` column); None without batch and seq."""
    return None if batch is None or seq is None else float(batch) * float(seq) ** 2


def monomial(term: str, batch: float | None, seq: float | None, n: float | None) -> float:
    """The value of one menu term at a shape."""
    values = {"B*s": lambda: batch * seq, "B*s^2": lambda: batch * seq * seq,
              "B": lambda: batch, "1": lambda: 1.0, "n": lambda: n, "n^2": lambda: n * n,
              "n^3": lambda: n ** 3}
    return float(values[term]())


class FeatureLaw(BaseModel):
    """One feature as ``sum(coef * term)`` over monomials of the shape (empty: always 0)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    feature: str
    terms: list[str]
    coefs: list[float]
    n_counted: int = Field(description="shapes the law was fitted on")
    max_rel_error: float = Field(description="worst |law / counted - 1| over them")
    varied: list[str] = Field(description="axes that varied among the counted shapes")
    warnings: list[str] = []

    def at(self, batch: float | None = None, seq: float | None = None,
           n: float | None = None) -> float:
        return float(sum(c * monomial(t, batch, seq, n) for t, c in zip(self.terms, self.coefs)))

    def describe(self) -> str:
        if not self.terms:
            return f"{self.feature} = 0"
        return f"{self.feature} = " + " + ".join(f"{c:.6g}*{t}" for t, c in
                                               zip(self.terms, self.coefs))


class FeatureScaling(BaseModel):
    """How each feature of one workload grows with the shape: exact laws fitted by
    :func:`afford.fit.time.step_features.fit_scaling` (see that module).

    ``laws`` holds one :class:`FeatureLaw` per feature that was counted; a feature absent
    from it is unknown (never counted) and :meth:`features` gives ``None`` for it."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    axes: Axes
    laws: dict[str, FeatureLaw]

    def features(self, *, batch: float | None = None, seq: float | None = None,
                 n: float | None = None) -> dict[str, float | None]:
        """``{"tokens": ..., "gemm_flops": ..., "attn_flops": ...}`` at a shape, and for
        transformer-shaped workloads ``seq_tokens`` (B*s^2, by definition)."""
        if self.axes == "batch_seq" and (batch is None or seq is None):
            raise ValueError("this workload's features need batch and seq")
        if self.axes == "n" and n is None:
            raise ValueError("this workload's features need n")
        out = {f: (self.laws[f].at(batch, seq, n) if f in self.laws else None)
               for f in FEATURES}
        if self.axes == "batch_seq":
            out["seq_tokens"] = seq_tokens(batch, seq)
        return out

    def describe(self) -> str:
        return "; ".join(law.describe() for law in self.laws.values())


class CountedShape(BaseModel):
    """A shape and what was counted there: ``batch`` and ``seq`` (two axes) or ``n`` (one),
    its tokens per step, and its GEMM / attention FLOPs where counted (None: not counted)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    batch: Extent | None = None
    seq: Extent | None = None
    n: Extent | None = None
    tokens: Extent
    gemm_flops: Flops | None = None
    attn_flops: Flops | None = None
