"""The step-time model's features: how a step's work grows with its shape.

A warm training step of a transformer-shaped workload does two kinds of counted work:

- **GEMM FLOPs** (``mm``, ``addmm``, ``matmul``, ``linear``, convolutions): the projections and
  the MLP, proportional to the tokens of the step, B*s (plus a constant where a layer's work
  does not depend on the shape);
- **attention FLOPs** (``bmm``, ``baddbmm`` and the fused attention kernels): the scores and
  their weighted sum, proportional to B*s^2.

One child of certify counts the FLOPs of one step once per shape
(``torch.utils.flop_counter.FlopCounterMode``, :mod:`afford.measure.probes.flops`) and
:func:`split_flops` sorts its per-op counts into these classes. :func:`fit_scaling` then
finds, per feature, the exact law in a small menu of monomials of the shape (B*s, B*s^2,
B, 1 on two axes; n, n^2, n^3, 1 on one axis) that reproduces every counted value within
``EXACT_REL``: FLOPs are polynomials in the shape, so the law is exact, not a fit, and the
model can evaluate the features at any shape it was never run at. A law must be checked by
at least one counted shape more than it has terms, else it is refused. Where FLOPs were not
counted (the counter failed on a kernel it does not know), the features are the shape's own:
tokens = B*s and, on two axes, B*s^2 (:func:`afford.schema.time_features.seq_tokens`).

The laws live in :mod:`afford.schema.time_features` and the evaluation of a stored model in
:mod:`afford.schema.time_law`, below this layer, so reading a certificate needs neither this
module nor scipy.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from afford.schema.time_features import (
    FEATURES,
    Axes,
    CountedShape,
    FeatureLaw,
    FeatureScaling,
    monomial,
    seq_tokens,
)

__all__ = ["FEATURES", "Axes", "CountedShape", "FeatureLaw", "FeatureScaling", "fit_scaling",
           "fit_feature_law", "monomial", "op_class", "seq_tokens", "shape_axes",
           "split_flops"]

EXACT_REL = 1e-6  # a law must reproduce every counted value within this relative error
MAX_TERMS = 3
MENU: dict[str, tuple[str, ...]] = {"batch_seq": ("B*s", "B*s^2", "B", "1"),
                                    "n": ("n", "n^2", "n^3", "1")}
DEGREE = {"B*s^2": 3, "n^3": 3, "B*s": 2, "n^2": 2, "n": 1, "B": 1, "1": 0}

GEMM_OPS = frozenset({"mm", "addmm", "matmul", "linear", "_scaled_mm", "convolution",
                      "convolution_backward", "conv1d", "conv2d", "conv3d", "_convolution"})
ATTN_OPS = frozenset({"bmm", "baddbmm"})
ATTN_PREFIXES = ("_scaled_dot_product_", "_flash_attention", "_efficient_attention",
                 "_cudnn_attention", "scaled_dot_product")


def op_class(op: str) -> str:
    """``gemm``, ``attn`` or ``other`` for an op name as the counter gives it
    (``aten.mm``, ``aten.mm.default``, ``mm``...)."""
    name = str(op)
    name = name.removeprefix("aten.").removeprefix("torch.ops.aten.")
    name = name.split(".")[0]
    if name in GEMM_OPS:
        return "gemm"
    if name in ATTN_OPS or name.startswith(ATTN_PREFIXES):
        return "attn"
    return "other"


def split_flops(by_op: Mapping[str, float]) -> dict[str, float]:
    """The counted FLOPs of one step by class: ``{"gemm": ..., "attn": ..., "other": ...}``."""
    out = {"gemm": 0.0, "attn": 0.0, "other": 0.0}
    for op, n in by_op.items():
        out[op_class(op)] += float(n)
    return out


def shape_axes(shapes: Sequence[CountedShape]) -> Axes:
    """``batch_seq`` when every shape has batch and seq, ``n`` when every one has n."""
    if shapes and all(p.batch is not None and p.seq is not None for p in shapes):
        return "batch_seq"
    if shapes and all(p.n is not None for p in shapes):
        return "n"
    raise ValueError("every shape needs batch and seq, or n")


def fit_scaling(shapes: Sequence[CountedShape]) -> FeatureScaling:
    """Fit every feature from the shapes where it was counted (tokens: all shapes).
    Raises ``ValueError`` when a counted feature has no exact law in the menu."""
    axes = shape_axes(shapes)
    laws = {}
    for feature in FEATURES:
        counted = [p for p in shapes if getattr(p, feature) is not None]
        if counted:
            laws[feature] = fit_feature_law(feature, axes, counted)
    return FeatureScaling(axes=axes, laws=laws)


def _varied(axes: Axes, shapes: Sequence[CountedShape]) -> list[str]:
    names = ("batch", "seq") if axes == "batch_seq" else ("n",)
    return [a for a in names if len({getattr(p, a) for p in shapes}) > 1]


def _menu(axes: Axes) -> list[tuple[str, ...]]:
    terms = MENU[axes]
    out = []
    for k in range(1, MAX_TERMS + 1):
        out += [c for c in itertools.combinations(terms, k)]
    return out


def fit_feature_law(feature: str, axes: Axes, shapes: Sequence[CountedShape]) -> FeatureLaw:
    """The first law of the menu (fewest terms first) that reproduces every counted value of
    ``feature`` within ``EXACT_REL``; a feature counted as zero everywhere is the empty law."""
    y = np.array([float(getattr(p, feature)) for p in shapes])
    varied = _varied(axes, shapes)
    if np.all(y == 0):
        return FeatureLaw(feature=feature, terms=[], coefs=[], n_counted=len(shapes),
                          max_rel_error=0.0, varied=varied)
    distinct = {(p.batch, p.seq, p.n) for p in shapes}
    if len(distinct) < 2:
        raise ValueError(f"{feature}: counted at {len(distinct)} distinct shape(s); a law "
                         "needs one counted shape more than its terms (at least 2)")
    for terms in _menu(axes):
        if len(terms) + 1 > len(distinct):
            continue
        law = _try_terms(feature, terms, shapes, y, varied)
        if law is not None:
            return law
    raise ValueError(f"{feature}: no law of at most {MAX_TERMS} terms in "
                     f"{', '.join(MENU[axes])} reproduces the {len(shapes)} counted values "
                     f"within {EXACT_REL:g} (checked by one counted shape more than its terms)")


def _try_terms(feature: str, terms: tuple[str, ...], shapes: Sequence[CountedShape],
               y: np.ndarray, varied: list[str]) -> FeatureLaw | None:
    X = np.array([[monomial(t, p.batch, p.seq, p.n) for t in terms] for p in shapes])
    scale = np.abs(X).max(axis=0)
    if np.any(scale == 0):
        return None
    Xn = X / scale
    if np.linalg.matrix_rank(Xn, tol=1e-9) < len(terms):
        return None  # the counted shapes cannot tell these terms apart
    w = 1.0 / np.abs(np.where(y == 0, 1.0, y))  # relative errors
    coef, *_ = np.linalg.lstsq(Xn * w[:, None], y * w, rcond=None)
    coef = coef / scale
    pred = X @ coef
    denom = np.where(y == 0, 1.0, np.abs(y))
    err = float(np.max(np.abs(pred - y) / denom))
    if err > EXACT_REL or np.any(np.abs(coef) * scale < EXACT_REL * np.max(np.abs(y))):
        return None  # inexact, or a term that contributes nothing (a smaller law will do)
    order = sorted(range(len(terms)), key=lambda i: -DEGREE[terms[i]])
    warnings = []
    if "B*s" in "".join(terms) and varied == ["seq"]:
        warnings.append(f"{feature}: the batch did not vary among the counted shapes; its law "
                        "assumes work proportional to the batch")
    return FeatureLaw(feature=feature, terms=[terms[i] for i in order],
                      coefs=[float(coef[i]) for i in order], n_counted=len(shapes),
                      max_rel_error=err, varied=varied, warnings=warnings)
