"""The scale ladder's rungs and their per-step figure (column (a)), pure.

A rung is a parameter count, and a shape: given (``1B:d2048L16``) or chosen at the family's
measured aspect d / L and head dimension (:meth:`FamilyScaling.shape_for`). Its step comes
from a size law (:mod:`afford.fit.time.size_law`) at the family's work there
(:class:`~afford.schema.sizes_section.FamilyScaling`):

- **tinylm** (the default): the certificate's size law over its sizes; an older certificate,
  whose section has no size law, is refitted here from the sizes it stored, within its
  measured ceilings (the GEMM rate of the mode's dtype, the copy bandwidth);
- **a family of the user's** (``-w hf:llama``, ``-w pkg.mod:factory`` whose shape names
  d and L): measured at one size, at several batch x seq. Its work at any size is scaled
  from the FLOPs counted there (:func:`afford.fit.time.size_work.from_one_size`); its own
  profiled steps give its cost per GEMM and attention FLOP, its host's issue cost and
  gap; the costs a single size cannot separate (per kernel, per state byte, and how kernels
  grow with depth) are carried from this box's tinylm size law where the certificate has
  one. Every other size of the family is an extrapolation from the one measured, said so.

The error stated with each step: within the sizes fitted, the law's worst leave-one-out
error; beyond them, the error at the largest size held out (its factor beside), the one
extrapolation the certificate could check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from afford.core.errors import InputError
from afford.core.provenance import Tag, Tagged, fitted, module
from afford.core.published_constants import ScalingConstants
from afford.core.units import MAX_DIM, UnitError, bounded, format_count, parse_count, whole
from afford.figures import probes_figures
from afford.figures.memory_figures import law_or_none
from afford.fit.stats import median
from afford.fit.time.size_law import SizeObs, fit_size_law, fit_sizes_section
from afford.fit.time.size_work import ReadSize, from_one_size
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.point import Point
from afford.schema.sizes_section import FamilyScaling, SizeLaw, SizeWork

DEFAULT_FAMILY = "tinylm"
SHAPE_MISMATCH = 0.1  # a given shape's own parameters this far from N: said in the row


@dataclass(frozen=True)
class Entry:
    """One requested size: N, and its width and depth when given (``124M:d768L12``)."""

    params: float
    d: int | None = None
    L: int | None = None
    H: int | None = None


def parse_entries(text: str) -> list[Entry]:
    """``"7.5M,20M,124M:d768L12,1B"`` -> entries; InputError when malformed."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        count, _, shape = item.partition(":")
        try:  # at least 1, at most MAX_COUNT (1e18): beyond, tokens and FLOPs overflow
            n = bounded(parse_count(count), "a parameter count", low=1, low_open=False)
        except UnitError as exc:
            raise InputError(f"--params {item!r}: {exc}") from None
        out.append(Entry(n, *_shape(item, shape)) if shape else Entry(n))
    if not out:
        raise InputError("--params: give at least one parameter count, e.g. 7.5M,124M,1B")
    return out


def _shape(item: str, text: str) -> tuple[int, int, int | None]:
    """``d768L12H12`` -> (768, 12, 12): whole numbers from 1 to 2**40 each."""
    m = re.fullmatch(r"d([0-9]+)L([0-9]+)(?:H([0-9]+))?", text)
    try:
        dims = [whole(g, "a dimension", high=MAX_DIM) if g is not None else None
                for g in m.groups()] if m else None
    except UnitError:
        dims = None
    if dims is None:
        raise InputError(f"--params {item!r}: write a shape as N:d<width>L<layers>[H<heads>], "
                         "e.g. 124M:d768L12H12 (each a whole number from 1 to 2**40)")
    return dims[0], dims[1], dims[2]


@dataclass(frozen=True)
class StepSource:
    """Where column (a) comes from for one family: its size law and scaling at one batch x
    seq, or what it lacks (``lacks``: the one reason there is no (a))."""

    workload: str
    batch: int | None
    seq: int | None
    law: SizeLaw | None = None
    scaling: FamilyScaling | None = None
    lacks: str = ""
    how: str = ""  # how the law was had: stored, refitted here, read at one size
    box: SizeLaw | None = None  # this box's tinylm size law (a family's beyond-size check)

    @property
    def tokens_per_step(self) -> int | None:
        return self.batch * self.seq if self.batch and self.seq else None


@dataclass(frozen=True)
class Ceilings:
    """The measured ceilings a law is bounded by, and the state bytes per parameter."""

    gemm_rate: float | None
    bandwidth: float | None
    bytes_per_param: float


def step_source(cert: Certificate, workload: str | None, mode: str, ceil: Ceilings
                ) -> StepSource:
    """The step source for ``workload`` (default tinylm's sizes) in ``mode``."""
    box = tinylm_source(cert, mode, ceil)
    if workload is None or workload == DEFAULT_FAMILY:
        return box
    return family_source(cert, family_result(cert, workload, mode), ceil, box)


def tinylm_source(cert: Certificate, mode: str, ceil: Ceilings) -> StepSource:
    s = cert.sizes
    if s is None:
        return StepSource(DEFAULT_FAMILY, None, None, lacks=_no_sizes(cert))
    if s.mode != mode:
        return StepSource(DEFAULT_FAMILY, s.batch, s.seq,
                          lacks=f"the sizes were measured in {s.mode}, not {mode}")
    if s.size_law is not None and s.scaling is not None:
        return StepSource(DEFAULT_FAMILY, s.batch, s.seq, s.size_law, s.scaling,
                          how="the certificate's size law", box=s.size_law)
    law, scaling, notes = fit_sizes_section(
        DEFAULT_FAMILY, s.sizes, batch=s.batch, seq=s.seq, gemm_rate=ceil.gemm_rate,
        bandwidth=ceil.bandwidth, bytes_per_param=ceil.bytes_per_param)
    if law is None:
        return StepSource(DEFAULT_FAMILY, s.batch, s.seq, lacks="; ".join(notes)[:300])
    return StepSource(DEFAULT_FAMILY, s.batch, s.seq, law, scaling, box=law,
                      how="refitted here from the certificate's sizes (it predates the "
                          "size law), within its measured ceilings")


def _no_sizes(cert: Certificate) -> str:
    if cert.environment.device_type == "cpu":
        return ("no model sizes measured: a CPU's certify times one size of tinylm; "
                "afford certify --sizes times five and fits the size law")
    return ("no sizes section (a certificate from before the ladder's sizes, or one "
            "without tinylm): certify again, or afford certify --sizes")


def family_result(cert: Certificate, name: str, mode: str) -> WorkloadResult:
    """The certificate's result for ``name`` in ``mode`` (an ``hf:`` family name matches
    its sized spec, ``hf:gpt_neox`` its ``hf:gpt_neox@d1024L16...``); InputError listing
    what it has."""
    found = [r for r in cert.workloads if r.mode == mode and
             (r.name == name or r.name.partition("@")[0] == name)]
    if len(found) == 1:
        return found[0]
    have = ", ".join(f"{r.name} ({r.mode})" for r in cert.workloads) or "none"
    if found:
        raise InputError(f"-w {name!r}: the certificate has {len(found)} sizes of it in "
                         f"{mode} ({', '.join(r.name for r in found)}); name one")
    raise InputError(f"-w {name!r}: the certificate has no such workload in {mode}; it has: "
                     f"{have}")


def _profiled(r: WorkloadResult) -> list[Point]:
    return [p for p in list(r.points) + list(r.design_points)
            if p.usable and p.device_busy_seconds and p.kernels_per_step and p.flops
            and p.flops.gemm and p.params and p.tokens_per_step]


def _dims(p: Point) -> tuple[int, int, int, int, int] | None:
    """(B, s, d, L, H) of a point whose shape names width and depth."""
    sh = p.shape
    b, s = sh.get("batch", sh.get("n")), sh.get("seq", sh.get("s"))
    if not all(isinstance(sh.get(k), int) for k in ("d", "L")) or not b or not s:
        return None
    return int(b), int(s), sh["d"], sh["L"], int(sh.get("H") or max(1, sh["d"] // 64))


def family_source(cert: Certificate, r: WorkloadResult, ceil: Ceilings, box: StepSource
                  ) -> StepSource:
    """A family measured at one size, scaled (module docstring)."""
    pts = [p for p in _profiled(r) if _dims(p) is not None]
    if not pts:
        why = ("its shape names no width d and depth L" if not any(
            _dims(p) for p in r.points) else "none of its steps was profiled with its FLOPs "
            "counted (a GPU certificate of this afford profiles them)")
        return StepSource(r.name, None, None, lacks=f"{r.name} cannot be scaled: {why}")
    base = _base_point(pts, box)
    b, s, d, L, H = _dims(base)
    vocab = base.vocab or 0
    try:
        scaling = from_one_size(r.name, ReadSize(d, L, H, float(base.params), base.flops.gemm,
                                                 base.flops.attn), vocab, b, s)
    except ValueError as exc:
        return StepSource(r.name, b, s, lacks=f"{r.name} cannot be scaled: {exc}")
    law = fit_size_law([_obs(p, ceil) for p in pts], batch=b, seq=s, gemm_rate=ceil.gemm_rate,
                       bandwidth=ceil.bandwidth, bytes_per_param=ceil.bytes_per_param,
                       carried=_carried(box.law), kernel_law=_kernels(box.law, pts, L))
    carried = f"; per kernel and per state byte from {box.how}" if box.law else ""
    return StepSource(r.name, b, s, law, scaling, box=box.law,
                      how=f"{r.name} read at d{d}L{L} ({len(pts)} profiled shapes){carried}")


def _base_point(pts: list[Point], box: StepSource) -> Point:
    """The family's point at the tinylm law's batch x seq where measured, else its most
    tokens."""
    same = [p for p in pts if box.batch and _dims(p)[:2] == (box.batch, box.seq)]
    return (same or sorted(pts, key=lambda p: (p.tokens_per_step, p.median_seconds)))[-1]


def _obs(p: Point, ceil: Ceilings) -> SizeObs:
    _, _, d, L, _ = _dims(p)
    w = SizeWork(d=d, L=L, params=float(p.params), gemm_flops=p.flops.gemm,
                 attn_flops=p.flops.attn or 0.0, state_bytes=ceil.bytes_per_param * p.params,
                 kernels=p.kernels_per_step)
    return SizeObs(label=f"{p.shape.get('batch')}x{p.shape.get('seq')}", work=w,
                   seconds=float(p.median_seconds), child_seconds=tuple(p.child_medians),
                   busy_seconds=p.device_busy_seconds, gap_seconds=p.device_gap_seconds)


def _carried(box: SizeLaw | None) -> dict[str, float]:
    if box is None or box.sides != "profiled":
        return {}
    return {c: box.coefficients[c] for c in ("kernels", "state_bytes") if c in box.coefficients}


def _kernels(box: SizeLaw | None, pts: list[Point], L: int) -> tuple[float, float]:
    """The family's kernels = k0 + k1 L: its count at L, grown with depth as tinylm's on
    this box grows (else all of them per layer)."""
    k = float(median([float(p.kernels_per_step) for p in pts]))
    if box is None or box.kernels_fixed is None or box.kernels_per_layer is None:
        return 0.0, k / L
    f = k / (box.kernels_fixed + box.kernels_per_layer * L)
    return box.kernels_fixed * f, box.kernels_per_layer * f


def gemm_dtype(cert: Certificate, mode: str) -> str:
    """The matmul dtype of a mode: bf16, fp16, or fp32 (tf32 when the run allowed it)."""
    if mode in ("bf16", "fp16"):
        return mode
    return "tf32" if cert.environment.tf32_matmul else "fp32"


def ceilings(cert: Certificate, workload: str | None, mode: str, constants: ScalingConstants
             ) -> tuple[Ceilings, Tagged | None, str]:
    """What the size law is bounded by: the measured GEMM rate of the mode's dtype (never a
    datasheet's: else None and why), the measured copy bandwidth, and the family's state
    bytes per parameter (its memory law's count, else ZeRO's 16)."""
    dtype = gemm_dtype(cert, mode)
    rate = probes_figures.gemm_rate(cert, dtype)
    note = ""
    if rate is None:
        note = (f"no measured {dtype} GEMM rate in this certificate (the probes stage did "
                "not run); the floor is never taken from a datasheet")
    elif rate.tag is not Tag.MEASURED:
        note, rate = f"the {dtype} GEMM rate here is {rate.tag.value}, not measured", None
    bw = probes_figures.copy_bandwidth(cert)
    name = DEFAULT_FAMILY if workload in (None, DEFAULT_FAMILY) else \
        family_result(cert, workload, mode).name
    mlaw = law_or_none(cert, name, mode)
    bpp = mlaw.bytes_per_param if mlaw is not None and mlaw.bytes_per_param else \
        constants.state_bytes_per_param
    return Ceilings(rate.value if rate is not None else None,
                    bw.value if bw is not None else None, bpp), rate, note


# ---- a rung -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RungStep:
    """Column (a)'s step at one rung, with its stated error and its extrapolation."""

    shape: tuple[int, int, int]
    work: SizeWork
    seconds: Tagged
    error: Tagged | None
    beyond: float | None  # params over the largest size the law was fitted on
    regime: str


def rung_shape(src: StepSource, e: Entry) -> tuple[int, int, int] | None:
    """The rung's (d, L, H): given, else chosen at the family's aspect and head dim."""
    if e.d is not None and e.L is not None:
        hd = src.scaling.head_dim if src.scaling else 64
        return e.d, e.L, e.H or max(1, e.d // hd)
    return src.scaling.shape_for(e.params) if src.scaling is not None else None


def rung_step(src: StepSource, e: Entry, bytes_per_param: float, device: str
              ) -> RungStep | None:
    """The law's step at the rung (FITTED; extrapolated outside the sizes fitted)."""
    law, shape = src.law, rung_shape(src, e)
    if law is None or shape is None:
        return None
    d, L, _ = shape
    work = src.scaling.work(d, L, bytes_per_param, e.params)
    got = law.predict(work)
    hi = law.params_range[1]
    extra = law.extrapolated(e.params)
    secs = fitted(got.seconds, "s", f"step at d{d}L{L}, {src.batch}x{src.seq} tokens: "
                  f"{got.regime}-bound, {law.describe()}; {src.how}; {device}",
                  extrapolated=extra)
    return RungStep(shape=shape, work=work, seconds=secs, error=_error(src, e.params),
                    beyond=e.params / hi if e.params > hi * (1 + 1e-9) else None,
                    regime=got.regime)


def _error(src: StepSource, params: float) -> Tagged | None:
    """The law's own stated error at this rung (module docstring)."""
    law = src.law
    if not law.extrapolated(params):
        worst = law.loo_worst
        return None if worst is None else module(worst, "share", (
            f"worst leave-one-out error over the {len(law.points)} "
            f"{'shapes' if src.workload != DEFAULT_FAMILY else 'sizes'} fitted"))
    check = law.held_out or (src.box.held_out if src.box is not None else None)
    if check is None:
        return None
    whose = "" if law.held_out else f"this box's {DEFAULT_FAMILY} law, "
    return module(abs(check.rel_error), "share", (
        f"{whose}the largest size held out ({check.label}, {format_count(check.params)}) "
        f"predicted at x{check.factor:.2g} beyond the others: {check.rel_error:+.0%}"))


def law_checks(src: StepSource) -> str:
    """The law's checks in words: leave-one-out over what it fitted, the largest held out."""
    law = src.law
    if law is None:
        return ""
    parts = []
    if law.loo_worst is not None:
        parts.append(f"leave-one-out worst {law.loo_worst:.0%} over {len(law.points)} "
                     f"{'sizes' if src.workload == DEFAULT_FAMILY else 'shapes'}")
    if law.held_out is not None:
        h = law.held_out
        parts.append(f"largest size held out ({h.label}) predicted {h.rel_error:+.0%} at "
                     f"x{h.factor:.2g} beyond the others")
    return "; ".join(parts) or "unchecked: fewer than three sizes"


def row_shape(shape: tuple[int, int, int] | None, src: StepSource) -> dict[str, int] | None:
    if shape is None:
        return None
    out = dict(zip(("d", "L", "H"), shape))
    if src.batch and src.seq:
        out.update(batch=src.batch, seq=src.seq)
    return out


def shape_note(src: StepSource, e: Entry, shape: tuple[int, int, int] | None) -> str:
    """How the rung's shape was had: chosen, or given (and whether its parameters are N's)."""
    sc = src.scaling
    if shape is None or sc is None:
        return ""
    d, L, _ = shape
    own = sc.params_at(d, L)
    if e.d is None:
        return (f"chosen: d{d}L{L} at {src.workload}'s aspect d/L = {sc.aspect:g} and "
                f"head dim {sc.head_dim} ({format_count(own)} parameters)")
    if abs(own / e.params - 1) > SHAPE_MISMATCH:
        return (f"given: d{d}L{L} has {format_count(own)} parameters in {src.workload}'s "
                f"family, not {format_count(e.params)}: the step is the shape's, tokens and "
                "6 N D are N's")
    return "given"
