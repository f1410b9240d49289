"""Rich tables for the memory law and ``afford size``; every number passes :func:`fmt`."""

from __future__ import annotations

from rich.text import Text

from afford.core.provenance import Tagged, fitted, inherited, measured, module, run_label
from afford.figures.memory_figures import SizeReport, heldout_accuracy
from afford.fit.memory.memory_fit import BATCH_CAP
from afford.report.rich_table import Table
from afford.report.terminal import LEGEND, fmt
from afford.schema.memory_section import DefaultVerdict, MemoryLaw, signed_bytes


def _yes_no(x: bool | None) -> str:
    return "unknown" if x is None else ("yes" if x else "NO")


FITS_WORDS = {"yes": "yes", "likely": "likely (extrapolated; fits even with its plausible "
              "error)", "uncertain": "UNCERTAIN (the margin is inside what the figure may "
              "be off by)", "no": "NO"}


def fits_text(m) -> str:
    """The memory answer's verdict in words, why, and what would settle it."""
    if m.fits is None:
        return "unknown (no budget)"
    out = f"{FITS_WORDS[m.fits]}: {m.fits_why}"
    return out + (f"; settle it: {m.settle}" if m.settle else "")


def size_tables(r: SizeReport) -> list:
    """The answer, where it stops, the comparison with default formulas, the verdicts."""
    m, law = r.memory, r.law
    d = m.shape
    title = (f"{r.workload} {r.mode} on {r.device}: batch {d['B']} x seq {d['s']}"
             + (f" (d {d['d']}, L {d['L']}, H {d['H']})" if "d" in d else ""))
    main = Table(show_header=False)
    main.add_column("quantity")
    main.add_column("value", overflow="fold")
    rows = [("parameters", fmt(law.params)),
            ("states (weights, grads, optimizer)", fmt(law.states))]
    rows += answer_rows(r)
    rows += [("device memory", fmt(r.device_memory)),
             ("budget", fmt(r.budget)), ("share of budget", fmt(r.budget_share)),
             ("fits", fits_text(m) + (f" ({r.note})" if r.note else "")),
             (f"largest batch that fits at seq {d['s']}", fmt(r.max_batch)),
             ("held-out error of the memory law (max)", fmt(r.heldout_allocated)
              + (f"; reserved {fmt(r.heldout_reserved)}" if r.heldout_reserved else ""))]
    for k, v in rows:
        main.add_row(k, v)
    out = [Text(title), main]
    if r.replay is None or r.replay.breakdown is None:
        out.append(law_breakdown_table(r))
    return out + [comparison_table(r), verdict_table(r.verdicts, "verdicts at this shape")]


def law_breakdown_table(r: SizeReport) -> Table:
    """Where the memory goes at the asked shape by the answer's figures (no allocator replay
    to class every block: the states are not split into weights, gradients and optimizer
    state)."""
    from afford.figures.memory_figures import law_breakdown

    d = r.memory.shape
    t = Table(title=f"where the memory goes at the peak (batch {d['B']} x seq {d['s']})",
              title_justify="left")
    for col in ("class", "bytes", "share of the peak"):
        t.add_column(col, overflow="fold")
    parts = law_breakdown(r.memory)
    total = sum(float(v.value) for _, v in parts)
    for label, v in parts:
        t.add_row(label, fmt(v), fmt(module(float(v.value) / total, "ratio",
                                            "class / peak")) if total > 0 else "-")
    return t


MODEL_NAME = {"measured": "measured here", "replay": "allocator replay", "law": "memory law"}


def answer_rows(r: SizeReport) -> list[tuple[str, str]]:
    """The one memory answer: its figures and error, the other model where the two
    disagree, where the certificate stops; the law's own figures beside another answer."""
    m, law = r.memory, r.law
    src = MODEL_NAME[m.source]
    err = f"; held-out error {fmt(m.error)}" if m.error is not None else ""
    if m.reserved is None:  # a CPU
        rows = [(f"peak RSS ({src})", fmt(m.allocated) + err)]
    else:
        rows = [(f"peak allocated ({src})", fmt(m.allocated)),
                (f"peak reserved ({src}: answers)", fmt(m.reserved) + err)]
    rows.append(("answered by", m.why))
    if m.other is not None:
        rows.append((f"peak reserved ({MODEL_NAME[m.other_source]}: disagrees beyond the "
                     "errors)", fmt(m.other)))
    if m.range is not None:
        rows.append(("measured range", m.range.label()))
    if m.extrapolated:
        rows.append(("extrapolated", "; ".join(m.reasons)))
        if m.plausible_error is not None:
            rows.append(("plausible error", fmt(m.plausible_error)
                         + (f" + {fmt(m.path_bound)}" if m.path_bound else "")))
    if m.source != "law" and law.reserved is not None:
        rows += [("peak allocated (memory law)", fmt(law.allocated)),
                 ("peak reserved (memory law)", fmt(law.reserved))]
    return rows


def comparison_table(r: SizeReport) -> Table:
    t = Table(title="the same shape by default formulas (for comparison)", title_justify="left")
    for col in ("formula", "peak at this shape", "largest batch"):
        t.add_column(col, overflow="fold")
    t.add_row("afford (fitted on this box)", fmt(r.memory.allocated), fmt(r.max_batch))
    for c in r.comparisons:
        t.add_row(c.name, fmt(c.peak), fmt(c.max_batch))
    t.caption = LEGEND
    return t


def verdict_table(verdicts: list[DefaultVerdict], title: str) -> Table:
    """Compact: the consequence is the largest batch by the default against the fit's."""
    t = Table(title=title, title_justify="left")
    for col in ("default", "constant", "default value", "fitted", "effect on peak", "verdict",
                "largest batch: default / fit"):
        t.add_column(col, overflow="fold")
    prev = None
    for v in verdicts:
        src = f"verdict on {v.default_name}"
        got = measured if v.constant == "bytes_per_param" else fitted
        named = v.default_name != prev or v.constant == "formula"  # each default's first row
        prev = v.default_name
        t.add_row(v.default_name if named else "",
                  v.constant, _num(inherited, v.default_value, v.citation),
                  _num(got, v.fitted_value, "this box's memory law"),
                  fmt(module(v.effect, "ratio", src + ": default / fitted - 1")),
                  v.status + (f" ({v.direction})" if v.direction else ""), _batches(v))
    t.caption = "optimistic: the default under-predicts memory (a run it admits may not fit)"
    return t


def _batches(v: DefaultVerdict) -> str:
    if v.max_batch_fitted is None or v.max_batch_default is None:
        return "-"
    d = "any" if v.max_batch_default >= BATCH_CAP else str(v.max_batch_default)
    src = f"largest_batch under {v.budget_bytes:.0f} B"
    return (f"{d} / {fmt(module(v.max_batch_fitted, '', src))}"
            if d == "any" else
            f"{fmt(module(v.max_batch_default, '', src))} / "
            f"{fmt(module(v.max_batch_fitted, '', src))}")


def _num(tag, x: float | None, source: str) -> str:
    return "-" if x is None else fmt(tag(float(f"{x:.4g}"), "", source))


def memory_summary_table(cert) -> Table:
    """One row per law of a certificate's memory section (for ``afford certify``)."""
    run = run_label(cert)
    t = Table(title=f"memory law: states + fixed + L*(C_res B*s*d + C_op B*H*s^2) "
              f"({cert.memory.wall_seconds:.1f} s)", title_justify="left")
    for col in ("workload", "mode", "C_res", "C_op", "fixed", "R^2", "states",
                "held-out max error", "one step understates by", "allocator replay"):
        t.add_column(col, overflow="fold")
    for law in cert.memory.laws:
        f = law.allocated
        src = f"{law.workload} {law.mode}: {f.describe()}; {run}"
        a, r = heldout_accuracy(law, run)
        t.add_row(law.workload, law.mode, fmt(fitted(round(f.c_res, 2), "", src)),
                  fmt(fitted(round(f.c_op, 3), "", src)) if f.s2_term else "-",
                  fmt(fitted(_signed(f.fixed_bytes), "", src))
                  if f.form == "states_plus_fixed" else "-",
                  fmt(module(round(f.r2, 5), "", "fit_memory")),
                  fmt(measured(round(law.bytes_per_param, 3), "B/param", "states counted")),
                  fmt(a) + (f"; reserved {fmt(r)}" if r else ""), _loop(law),
                  _replay_cell(law, run))
    for n in cert.memory.not_executable:
        t.add_row(n.what, "-", n.status, "-", "-", "-", "-", "-", n.reason, "-")
    t.caption = "CPU: the law of the peak RSS increment; CUDA: of peak allocated (and reserved)"
    return t


def _signed(n: float) -> str:
    """A law's constant term shown alone: ``-1.20 MiB`` (a fitted intercept may be
    negative), ``190.80 MiB``; the law's formula writes it as a term (``- 1.20 MiB``)."""
    term = signed_bytes(n)
    return term[2:] if term.startswith("+") else "-" + term[2:]


def _replay_cell(law: MemoryLaw, run: str) -> str:
    """The replay's held-out worst reserved error and the verdict, in one cell."""
    rp = law.replay
    if rp is None:
        return "-"
    if rp.replay_worst_reserved_error is None:
        return "trusted" if rp.trusted else "NOT trusted"
    src = f"{law.workload} {law.mode}: allocator replay, max |error| of peak reserved over " \
          f"{len(rp.heldout)} held-out shapes; {run}"
    return (f"reserved {fmt(measured(rp.replay_worst_reserved_error, 'ratio', src))}; "
            f"{'trusted' if rp.trusted else 'NOT trusted'}, better: {rp.better}")


def _loop(law: MemoryLaw) -> str:
    if law.loop is None:
        return "-"
    return fmt(measured(round(law.loop.median_extra_bytes_per_param, 2), "B/param",
                        law.loop.note))


def tagged_json(t: Tagged | None) -> dict | None:
    return None if t is None else t.model_dump(mode="json")


# ---- the allocator replay ------------------------------------------------------------

BREAKDOWN_LABELS = {"parameters": "parameters", "workspaces": "library workspaces",
                    "optimizer_state": "optimizer state", "gradients": "gradients",
                    "activations": "activations saved for backward",
                    "temporaries": "temporaries", "slack": "allocator slack (reserved - "
                    "allocated)"}


def replay_tables(r: SizeReport) -> list:
    """``afford size``: the replay's answer under both allocator settings, and where the
    memory goes at the peak; nothing without a replay."""
    rp = r.replay
    if rp is None:
        return []
    t = Table(title="allocator replay (reserved = what the caching allocator holds)",
              title_justify="left", show_header=False)
    t.add_column("quantity")
    t.add_column("value", overflow="fold")
    conf = rp.alloc_conf or "unset (native allocator)"
    t.add_row("answers for this size", ("yes: " if rp.used else "no, the law does: ") + rp.why)
    t.add_row("PYTORCH_CUDA_ALLOC_CONF", conf)
    t.add_row("peak allocated", fmt(rp.allocated))
    t.add_row("peak reserved, native", fmt(rp.reserved_native) + f" (fits: "
              f"{_yes_no(rp.fits_native)})")
    t.add_row("peak reserved, expandable_segments:True", fmt(rp.reserved_expandable)
              + f" (fits: {_yes_no(rp.fits_expandable)})")
    t.add_row("largest batch, native / expandable", f"{fmt(rp.max_batch_native)} / "
              f"{fmt(rp.max_batch_expandable)}")
    if rp.lever:
        t.add_row("lever", rp.lever)
    out = [t]
    if rp.breakdown is not None:
        out.append(breakdown_table(rp.breakdown, rp.reserved.source,
                                   f"where the memory goes at the peak (batch {rp.breakdown.B} "
                                   f"x seq {rp.breakdown.s})"))
    return out


def breakdown_table(b, source: str, title: str) -> Table:
    """Bytes and share of reserved of each class at the peak (fit.breakdown's classes)."""
    t = Table(title=title, title_justify="left")
    for col in ("class", "bytes", "share of reserved"):
        t.add_column(col, overflow="fold")
    src = f"breakdown by lifetime at the allocated peak; {source}"
    for k, v in b.classes().items():
        t.add_row(BREAKDOWN_LABELS[k], fmt(fitted(v, "B", src)),
                  fmt(module(v / b.reserved_bytes, "ratio", "class / reserved at the peak")))
    t.add_row("reserved at the peak", fmt(fitted(b.reserved_bytes, "B", src)), "")
    return t
