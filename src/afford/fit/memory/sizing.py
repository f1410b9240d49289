"""Sizing: peak memory and the largest resident batch, from a fitted memory law (pure).

Predictions come from the law fitted on the box (:mod:`afford.fit.memory.memory_fit`), tagged
FITTED and flagged extrapolated outside the shapes it was fitted over. Beside them, for comparison,
the default constants a user would otherwise reach for, each with its source:

- the "4x model size" rule of thumb (accelerate's estimate: training takes about four times
  the fp32 model, i.e. 16 bytes per parameter and no activations);
- ZeRO's 16 bytes/param for mixed-precision Adam (Rajbhandari et al. 2020, section 3.1:
  2 + 2 + 12; fp32 weights with autocast: 4 + 4 + 8) plus Korthikanti et al. 2022, eq. 1:
  ``s*b*h*(34 + 5*a*s/h)`` activation bytes per layer in 16-bit (C_res = 34, C_op = 5);
  with fused attention the s^2 term vanishes and ``4*a*s*b`` bytes of softmax statistics
  remain, folded here into C_res as 34 + 4*H/d. Eq. 1 counts 16-bit activations: fp32
  doubles them (the convention of docs/REFERENCES.md's GPT-2 table);
- INHERITED constants measured by afford's own memory stage on one reference GPU
  (``data/memory_defaults.toml``, whose ``[source]`` names it), when the data file has them.

Frozen parameters (a LoRA base, frozen layers) hold only their weights: no gradient, no
optimizer state. The law counts ``bytes_per_param`` over trainable parameters and adds the
frozen weights' measured bytes; ZeRO's 16 B/param is for a trained parameter, so the ZeRO
default charges a frozen one its fp32 weight (4 B; afford's workloads keep fp32 weights under
autocast), while the "4x model size" rule, which knows no frozen parameters, charges 16 B to
every parameter of the model.

Residency is decided on reserved bytes (docs/DESIGN.md section 3, rule 4): CUDA budgets against the
reserved law; a CPU against the predicted peak RSS (the measured baseline plus the law).

The certify stage validates a law with these predictions (:mod:`afford.certification.stage_memory`);
reading a certificate's laws for ``afford size`` is :mod:`afford.figures.memory_figures`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from afford.core.provenance import Tag, Tagged, fitted, module
from afford.core.published_constants import MEMORY_DEFAULTS, load_memory_defaults
from afford.fit.memory.memory_fit import judge, largest_batch
from afford.schema.memory_law import (
    DIMS,
    budgeted_bytes,
    extrapolated,
    frozen_at,
    law_bytes,
    params_at,
    shape_dims,
)
from afford.schema.memory_section import DefaultVerdict, MemoryLaw
from afford.schema.user_constants import FORMULA_TERMS, UserConstants

VERDICT_TOLERANCE = 0.05
KORTHIKANTI = ("Korthikanti et al. 2022, Reducing Activation Recomputation in Large "
               "Transformer Models, eq. 1")
ZERO = "Rajbhandari et al. 2020, ZeRO, section 3.1 (16 bytes/param, mixed-precision Adam)"
FROZEN_WEIGHT_BYTES = 4.0  # a frozen parameter: its fp32 weight, no gradient, no Adam moments
FOUR_X = "the \"4x model size\" rule (accelerate's estimate: 4 x the fp32 model bytes)"


class Defaults(BaseModel):
    """A set of default constants of the law; ``None``: not part of this default (0)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    key: str
    name: str
    citation: str
    tag: Tag = Tag.INHERITED
    bytes_per_param: float | None = None
    frozen_bytes_per_param: float | None = None  # a frozen parameter's bytes (weights only)
    c_res: float | None = None
    c_op: float | None = None
    fixed_bytes: float | None = None
    per_constant: bool = True  # judge each constant, not only the whole formula
    formula: bool = True       # judge the whole formula (False: some of its terms are unknown)

    def bytes(self, params: float, dims: dict[str, int], frozen: float = 0.0) -> float:
        """The default formula's peak: states + fixed + L*(C_res*B*s*d + C_op*B*H*s^2);
        states = bytes_per_param x trainable params + frozen_bytes_per_param x ``frozen``."""
        B, s, d, L, H = (dims[k] for k in DIMS)
        return float((self.bytes_per_param or 0.0) * params + (self.fixed_bytes or 0.0)
                     + (self.frozen_bytes_per_param or 0.0) * frozen
                     + L * ((self.c_res or 0.0) * B * s * d + (self.c_op or 0.0) * B * H * s * s))


def activation_scale(mode: str) -> float:
    """Eq. 1 counts 16-bit activations; fp32 activations take twice the bytes."""
    return 2.0 if mode == "fp32" else 1.0


def four_x_model_size() -> Defaults:
    return Defaults(key="four_x_model_size", name="\"4x model size\" rule", citation=FOUR_X,
                    bytes_per_param=16.0, frozen_bytes_per_param=16.0, c_res=0.0, c_op=0.0,
                    per_constant=False)


def korthikanti_zero(mode: str, attention: str | None, d: int, H: int,
                     published: bool = False) -> Defaults | None:
    """ZeRO 16 B/param + eq. 1. ``published``: eq. 1 as printed (scores materialised) even
    for fused attention, as docs/REFERENCES.md's GPT-2 comparison uses it."""
    if attention is None:
        return None
    f = activation_scale(mode)
    if attention == "materialised" or published:
        c_res, c_op, variant = 34.0 * f, 5.0 * f, "eq. 1, scores materialised"
    else:
        c_res, c_op, variant = 34.0 * f + 4.0 * H / d, 0.0, "eq. 1 with fused attention"
    key = "korthikanti_eq1_zero" if published and attention == "fused" else "korthikanti_zero"
    return Defaults(key=key, name=f"Korthikanti ({variant}) + ZeRO 16 B/param",
                    citation=f"{KORTHIKANTI}; {ZERO}; {mode}: activations x{f:g}",
                    bytes_per_param=16.0, frozen_bytes_per_param=FROZEN_WEIGHT_BYTES,
                    c_res=c_res, c_op=c_op)


def inherited_defaults(mode: str, data: dict | None = None) -> tuple[Defaults | None, str]:
    """The INHERITED constants of ``mode`` from ``data/memory_defaults.toml`` (measured on the
    reference GPU its ``[source]`` names), or ``None`` and why not."""
    data = load_memory_defaults() if data is None else data
    table = data.get("modes", {}).get(mode, {})
    src = data.get("source", {})
    if not all(k in table for k in ("bytes_per_param", "c_res", "c_op")) or \
            not src.get("citation"):
        return None, (f"no INHERITED memory defaults for {mode} yet "
                      f"({MEMORY_DEFAULTS.name} is filled in from a measurement on the H200)")
    return Defaults(key="inherited", name=f"afford H200 defaults ({src.get('date', '?')})",
                    citation=f"{src['citation']}, commit {src.get('commit', '?')}",
                    bytes_per_param=float(table["bytes_per_param"]),
                    frozen_bytes_per_param=FROZEN_WEIGHT_BYTES, c_res=float(table["c_res"]),
                    c_op=float(table["c_op"]), fixed_bytes=float(table.get("fixed_bytes", 0.0))
                    ), ""


def defaults_for(law: MemoryLaw, data: dict | None = None) -> tuple[list[Defaults], list[str]]:
    """Every default to compare with, and notes on those that are missing."""
    d, H = law.base_dims["d"], law.base_dims["H"]
    out = [four_x_model_size()]
    notes = []
    for published in (False, True):
        k = korthikanti_zero(law.mode, law.attention, d, H, published)
        if k is not None and k.key not in {x.key for x in out}:
            out.append(k)
    inh, why = inherited_defaults(law.mode, data)
    if inh is not None:
        out.append(inh)
    else:
        notes.append(why)
    return out, notes


def user_defaults(consts: UserConstants, mode: str) -> tuple[Defaults | None, str]:
    """The user's constants of ``mode`` (``afford size --constants``) as one more default,
    INHERITED from the user's cited code and judged like the built-in ones; ``None`` and why
    when the file has none for the mode.
    The whole formula is judged only when bytes_per_param, c_res and c_op are all given."""
    mine = consts.of_mode(mode)
    if not mine:
        return None, f"{consts.name}: no constants for mode {mode}"
    names = ", ".join(f"{c.name} = {c.value:g} {c.unit} ({t})" for t, c in mine.items())
    whole = all(t in mine for t in FORMULA_TERMS)
    return Defaults(key="user", name=consts.name, citation=f"{consts.citation}: {names}",
                    frozen_bytes_per_param=FROZEN_WEIGHT_BYTES,
                    formula=whole, **{t: c.value for t, c in mine.items()}), \
        "" if whole else (f"{consts.name}: the whole formula is not judged in {mode} (it "
                          f"gives {', '.join(mine)}; it needs {', '.join(FORMULA_TERMS)})")


# ---- predictions from a fitted law, tagged ----------------------------------------------


@dataclass(frozen=True)
class Prediction:
    dims: dict[str, int]
    params: Tagged
    states: Tagged
    allocated: Tagged            # CUDA peak allocated; CPU peak RSS (baseline + increment)
    reserved: Tagged | None      # CUDA only
    ratio: Tagged | None         # reserved / allocated used
    budgeted: float              # what residency is decided on (reserved or RSS)
    extrapolated: bool
    notes: tuple[str, ...] = ()


def predict(law: MemoryLaw, shape: dict[str, int], run: str) -> Prediction:
    """Peak allocated and reserved (CUDA) or peak RSS (CPU) at ``shape``, tagged FITTED."""
    dims = shape_dims(law, shape)
    params, note = params_at(law, dims, shape)
    extra = extrapolated(law, dims)
    notes = [note] if note else []
    alloc = law_bytes(law, dims, params)
    src = f"{law.workload} {law.mode} memory law: {law.allocated.describe()}; {run}"
    if "params" in shape:
        p_tag = module(params, "params", "given by the caller")
    else:
        p_tag = module(params, "params", note or f"params = {law.params_p0:.0f} + "
                       f"{law.params_per_s:.0f} s, counted at the fitted shapes; {run}")
    frozen_b = frozen_at(law, dims)[1]
    states = module(law.bytes_per_param * params + frozen_b, "B",
                    f"{law.bytes_per_param:.3f} B/param (counted after the loop) x params"
                    + (f" + {frozen_b:.0f} B of frozen weights" if frozen_b else "") + f"; {run}")
    if law.device_type == "cpu":
        total = (law.baseline_rss_bytes or 0.0) + alloc
        return Prediction(dims, p_tag, states, fitted(total, "B", "peak RSS = measured "
                          f"baseline {law.baseline_rss_bytes or 0:.0f} B + {src}",
                          extrapolated=extra), None, None, total, extra, tuple(notes))
    res = budgeted_bytes(law, dims, params, alloc)
    if law.reserved is not None and law_bytes(law, dims, params, "reserved") < alloc:
        notes.append("the reserved law fell below allocated here; reserved taken = allocated")
    rsrc = (f"{law.workload} {law.mode} memory law: {law.reserved.describe()}; {run}"
            if law.reserved else f"allocated x worst measured ratio; {run}")
    return Prediction(dims, p_tag, states, fitted(alloc, "B", src, extrapolated=extra),
                      fitted(res, "B", rsrc, extrapolated=extra),
                      module(res / alloc, "x", "predicted reserved / predicted allocated"),
                      res, extra, tuple(notes))


def max_batch(law: MemoryLaw, shape: dict[str, int], budget_bytes: float, run: str) -> Tagged:
    """The largest batch whose predicted budgeted peak (reserved, or RSS) fits, FITTED;
    extrapolated when it lies outside the fitted shapes."""
    dims = shape_dims(law, shape)
    params, _ = params_at(law, dims, shape)

    def at(b: int) -> float:
        return budgeted_bytes(law, {**dims, "B": b}, params)

    n = largest_batch(at, budget_bytes)
    extra = extrapolated(law, {**dims, "B": n})  # n = 0 lies below every fitted batch
    what = "peak RSS" if law.device_type == "cpu" else "predicted peak reserved"
    return fitted(n, "sequences", f"largest B with {what} <= {budget_bytes:.0f} B at "
                  f"s={dims['s']}; {law.workload} {law.mode} memory law; {run}",
                  extrapolated=extra)


def _with_default(law: MemoryLaw, dims: dict[str, int], params: float, constant: str,
                  value: float) -> float:
    """The law with one constant replaced by a default's, floored at 0 B: a default that
    predicts no memory at all (a negative inherited fixed term on a model of a few MB) is
    judged WRONG and optimistic, not refused as a broken law."""
    f = law.allocated
    bpp = value if constant == "bytes_per_param" else law.bytes_per_param
    over = {} if constant == "bytes_per_param" else {constant: value}
    got = f.predict(bpp * params + frozen_at(law, dims)[1], dims["B"], dims["s"], dims["d"],
                    dims["L"], dims["H"], **over)
    return max(got, 0.0) if math.isfinite(got) else got


def formula_tag(defaults: Defaults, law: MemoryLaw, dims: dict[str, int], params: float
                ) -> Tagged:
    """A default formula's peak at dims, MODULE (computed from cited constants)."""
    frozen = frozen_at(law, dims)[0]
    v = defaults.bytes(params, dims, frozen)
    held = f" + {defaults.frozen_bytes_per_param or 0:g} B x {frozen:.0f} frozen" if frozen \
        else ""
    return module(v, "B", f"{defaults.name}: {defaults.bytes_per_param or 0:g} B/param x "
                  f"{params:.0f} params{held} + L*({defaults.c_res or 0:.2f} B*s*d + "
                  f"{defaults.c_op or 0:g} B*H*s^2); {defaults.citation}")


def verdicts(law: MemoryLaw, target: dict[str, int], budget_bytes: float | None,
             tolerance: float = VERDICT_TOLERANCE, data: dict | None = None,
             extra: tuple[Defaults, ...] = ()) -> list[DefaultVerdict]:
    """Each default (the built-in ones, then ``extra``: a user's own constants) judged
    against the fit at ``target`` (dims): per constant (the default replacing the fitted
    value) and as a whole formula."""
    params, _ = params_at(law, target, {})
    frozen = frozen_at(law, target)[0]
    fits = {"bytes_per_param": law.bytes_per_param, "c_res": law.allocated.c_res,
            "c_op": law.allocated.c_op, "fixed_bytes": law.allocated.fixed_bytes}

    def fitted_at(b: int) -> float:
        return law_bytes(law, {**target, "B": b}, params)

    def budgeted(b: int, alloc: float) -> float:
        return budgeted_bytes(law, {**target, "B": b}, params, alloc)

    out = []
    defaults, _ = defaults_for(law, data)
    for dflt in [*defaults, *extra]:
        consts = [c for c in fits if dflt.per_constant and getattr(dflt, c) is not None]
        for c in consts:
            value = getattr(dflt, c)
            out.append(judge(c, dflt.name, dflt.citation, default_value=value,
                             fitted_value=fits[c], fitted=fitted_at,
                             default=lambda b, c=c, v=value: _with_default(
                                 law, {**target, "B": b}, params, c, v),
                             budgeted=budgeted, target=target, budget_bytes=budget_bytes,
                             tolerance=tolerance))
        if not dflt.formula:
            continue
        out.append(judge("formula", dflt.name, dflt.citation, default_value=None,
                         fitted_value=None, fitted=fitted_at,
                         default=lambda b, d=dflt: d.bytes(params, {**target, "B": b}, frozen),
                         budgeted=budgeted, target=target, budget_bytes=budget_bytes,
                         tolerance=tolerance))
    return out
