"""Compare candidate memory-law forms on a certificate's raw readings, offline.

Each candidate is judged on the sweep shapes only, two ways:

- leave-one-out max: fit without one sweep shape, predict it (what ``fit_memory`` uses);
- backtest max: fit on the five shapes at or below the base (B <= B0 and s <= s0), predict
  the two sweep shapes at 2x (B0, 2 s0) and (2 B0, s0) — the same 2x extrapolation the
  held-out shapes ask of the whole sweep.

Then the held-out errors are printed beside them, to see (not to choose) what each
criterion's choice gives. Allocated: the four forms of :mod:`afford.fit.memory.memory_fit`. Reserved:
the law in the same forms (what afford does), reserved as an affine function of allocated
(reserved = a * allocated + b over the sweep shapes), and a fixed ratio (reserved = r *
allocated, least squares through the origin); each floored at the predicted allocated.

    python lab/scripts/memory_candidates.py CERT
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from afford.certify.stage_memory import s2_term
from afford.fit.memory.memory_fit import MemoryObservation, candidate_forms, fit_form, fit_memory
from afford.schema.cert import load_certificate
from afford.schema.memory_section import HELDOUT_ROLES, SWEEP_ROLES, form_name

Row = dict
Predictor = Callable[[Row], float]


def rows(law, roles) -> list[Row]:
    out = []
    for s in law.shapes:
        if s.role in roles and s.ok:
            out.append({**s.dims, "role": s.role, "states": float(s.states_bytes),
                        "allocated": s.peak("allocated"), "reserved": s.peak("reserved")})
    return out


def _obs(rs: list[Row], q: str) -> list[MemoryObservation]:
    return [MemoryObservation(B=r["B"], s=r["s"], d=r["d"], L=r["L"], H=r["H"],
                              states_bytes=r["states"], peak_bytes=r[q]) for r in rs]


def law(rs: list[Row], q: str, form: str, s2: bool) -> Predictor:
    f = fit_form(_obs(rs, q), q, form, s2)
    return lambda r: f.predict(r["states"], r["B"], r["s"], r["d"], r["L"], r["H"])


def reserved_on_allocated(rs: list[Row], alloc: Predictor, kind: str) -> Predictor:
    a = np.array([r["allocated"] for r in rs])
    y = np.array([r["reserved"] for r in rs])
    if kind == "affine":
        k, b = np.linalg.lstsq(np.column_stack([a, np.ones_like(a)]), y, rcond=None)[0]
    else:
        k, b = float(a @ y / (a @ a)), 0.0
    return floored(lambda r: k * alloc(r) + b, alloc)


def scores(make: Callable[[list[Row]], Predictor], sweep: list[Row], held: list[Row],
           base: dict, q: str) -> tuple[float, float, list[float]]:
    loo = [make(sweep[:i] + sweep[i + 1:])(r) / r[q] - 1 for i, r in enumerate(sweep)]
    small = [r for r in sweep if r["B"] <= base["B"] and r["s"] <= base["s"]]
    big = [r for r in sweep if r not in small]
    p = make(small)
    back = [p(r) / r[q] - 1 for r in big]
    p = make(sweep)
    return (max(map(abs, loo)), max(map(abs, back)) if big else float("nan"),
            [p(r) / r[q] - 1 for r in held])


def law_lines(lw) -> list[str]:
    sweep, held = rows(lw, SWEEP_ROLES), rows(lw, HELDOUT_ROLES)
    held.sort(key=lambda r: HELDOUT_ROLES.index(r["role"]))
    base, declared = lw.base_dims, s2_term(lw.attention)
    chosen = fit_memory(_obs(sweep, "allocated"), "allocated", declared)
    out = [f"### {lw.workload} {lw.mode} (attention {lw.attention}; held-out "
           + ", ".join(f"{r['B']}x{r['s']}" for r in held) + "; reserved candidates on the "
           f"allocated law afford picks, {chosen.name})", "",
           "| quantity | candidate | tried by afford | LOO max | backtest max | held-out |",
           "|---|---|---|---|---|---|"]

    def row(q, name, make, tried):
        loo, back, h = scores(make, sweep, held, base, q)
        out.append(f"| {q} | {name} | {'yes' if tried else 'no'} | {loo:.2%} | {back:.2%} | "
                   + ", ".join(f"{e:+.2%}" for e in h) + " |")

    for form, s2 in candidate_forms(None):
        row("allocated", form_name(form, s2),
            lambda rs, f=form, s=s2: law(rs, "allocated", f, s), declared in (None, s2))

    def alloc(rs):
        return law(rs, "allocated", chosen.form, chosen.s2_term)

    for form, s2 in candidate_forms(declared):
        row("reserved", f"law {form_name(form, s2)}",
            lambda rs, f=form, s=s2: floored(law(rs, "reserved", f, s), alloc(rs)), True)
    for kind in ("affine", "ratio"):
        row("reserved", f"{kind} in allocated",
            lambda rs, k=kind: reserved_on_allocated(rs, alloc(rs), k), False)
    return out + [""]


def floored(res: Predictor, alloc: Predictor) -> Predictor:
    """Reserved is never below allocated (as afford.fit.memory.sizing.budgeted_bytes)."""
    return lambda r: max(res(r), alloc(r))


def main(argv: list[str]) -> int:
    cert = load_certificate(argv[1])
    if cert.memory is None:
        print("no memory section in", argv[1])
        return 1
    for lw in cert.memory.laws:
        if lw.reserved is not None:
            print("\n".join(law_lines(lw)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
