"""A stored memory law evaluated at a shape: the bytes it predicts, the dims and parameter
count it reads them at, and whether the shape lies outside the shapes it was fitted over.

Every stored law is evaluated by the schema module that stores it, so that a certificate's
law gives one answer wherever it is read: the memory law here, the step-time model in
:mod:`afford.schema.time_law` (:func:`~afford.schema.time_law.predict_at`), the throughput
law by :meth:`afford.schema.laws.ThroughputLaw.predict`. Certify validates a law with these
functions; :mod:`afford.fit.memory.sizing` and :mod:`afford.figures.memory_figures` tag
their answers for plans and ``afford size``. Pure: numbers in, bytes out.
"""

import math

from afford.core.errors import InputError
from afford.schema.memory_section import MemoryLaw

DIMS = ("B", "s", "d", "L", "H")


def shape_dims(law: MemoryLaw, shape: dict[str, int]) -> dict[str, int]:
    """Law dims at ``shape`` (workload keys like ``seq`` or law keys like ``s``; missing
    keys keep the fitted base shape's values)."""
    dims = dict(law.base_dims)
    for dim, key in law.dim_keys.items():
        if key in shape:
            dims[dim] = int(shape[key])
    for dim in DIMS:
        if dim in shape:
            dims[dim] = int(shape[dim])
    bad = {k: v for k, v in dims.items() if not isinstance(v, int) or v <= 0}
    if bad:
        raise InputError(f"shape {bad}: every dimension must be a positive integer")
    return dims


def params_at(law: MemoryLaw, dims: dict[str, int], shape: dict[str, int]
              ) -> tuple[float, str | None]:
    """Parameters at ``dims``: given in ``shape['params']``; else from the fitted count
    (affine in s) at the fitted d, L, H; else scaled as L*d^2 (a transformer's weights are
    about 12*L*d^2, Kaplan et al. 2020, section 2.1) with a note."""
    if "params" in shape:
        return float(shape["params"]), None
    base = law.params_p0 + law.params_per_s * dims["s"]
    b = law.base_dims
    if (dims["d"], dims["L"], dims["H"]) == (b["d"], b["L"], b["H"]):
        return base, None
    scaled = base * (dims["L"] * dims["d"] ** 2) / (b["L"] * b["d"] ** 2)
    return scaled, ("params scaled as L*d^2 from the fitted model (pass params= for the "
                    "exact count)")


def frozen_at(law: MemoryLaw, dims: dict[str, int]) -> tuple[float, float]:
    """(frozen parameters, their weights' bytes) at dims: the fitted model's, scaled as
    L*d^2 where d or L differ (as :func:`params_at` scales the trainable count)."""
    b = law.base_dims
    k = (dims["L"] * dims["d"] ** 2) / (b["L"] * b["d"] ** 2)
    return law.frozen_params * k, law.frozen_bytes * k


def extrapolated(law: MemoryLaw, dims: dict[str, int]) -> bool:
    """Outside the fitted shapes: another d, L or H, or B, s, B*s or B*s^2 beyond the
    range the law was fitted over."""
    b = law.base_dims
    if any(dims[k] != b[k] for k in ("d", "L", "H")):
        return True
    B, s = dims["B"], dims["s"]
    for key, v in (("B", B), ("s", s), ("tokens", B * s), ("bss", B * s * s)):
        lo, hi = law.ranges[key]
        if not lo <= v <= hi:
            return True
    return False


def law_bytes(law: MemoryLaw, dims: dict[str, int], params: float, quantity: str = "allocated",
              **override: float) -> float:
    """The law's quantity (allocated, or the RSS increment on a CPU; or reserved) at dims;
    ``override`` may replace bytes_per_param, c_res, c_op or fixed_bytes."""
    f = law.allocated if quantity == "allocated" else law.reserved
    if f is None:
        raise ValueError(f"no {quantity} law")
    bpp = override.pop("bytes_per_param", law.bytes_per_param)
    got = f.predict(bpp * params + frozen_at(law, dims)[1], dims["B"], dims["s"], dims["d"],
                    dims["L"], dims["H"], **override)
    # on a CPU the law is of the RSS increment, which may be <= 0 at a tiny shape; on CUDA a
    # peak is positive: a broken law (hand-edited, or constants given) is refused
    if not math.isfinite(got) or (law.device_type == "cuda" and got <= 0):
        raise _not_a_peak(law, quantity, got, dims)
    return got


def _not_a_peak(law: MemoryLaw, quantity: str, got: float, dims: dict) -> InputError:
    return InputError(f"the memory law of {law.workload} ({law.mode}) predicts a {quantity} "
                      f"peak of {got:.4g} B at {dims}: not a peak; its fixed term or "
                      "constants are wrong (certify again)")


def budgeted_bytes(law: MemoryLaw, dims: dict[str, int], params: float,
                   allocated_bytes: float | None = None) -> float:
    """What residency is decided on: CUDA reserved (the reserved law; or ``allocated_bytes``
    times the reserved/allocated ratio the two laws imply at dims), CPU baseline + RSS law."""
    alloc = law_bytes(law, dims, params) if allocated_bytes is None else allocated_bytes
    if law.device_type == "cpu":
        rss = (law.baseline_rss_bytes or 0.0) + alloc
        if not rss > 0:
            raise _not_a_peak(law, "RSS", rss, dims)
        return rss
    if law.reserved is None:
        return projected_reserved(alloc, law.worst_reserved_ratio or 1.0)
    ratio = max(1.0, law_bytes(law, dims, params, "reserved") / law_bytes(law, dims, params))
    return alloc * ratio


def projected_reserved(allocated_bytes: float, ratio: float) -> float:
    """COSTS 3.2: allocated x the worst reserved/allocated ratio over the same workload's
    resident measured shapes -- what residency is budgeted on where a workload has an
    allocated figure and no reserved one (never another workload's ratio: the smallest
    shapes of a sweep reserve several times what they allocate)."""
    return allocated_bytes * ratio
