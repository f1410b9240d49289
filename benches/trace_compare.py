"""Where a fresh process's allocator history parts from the certificate's, shape by shape
(a bench for the figures of a device run, run anywhere: it reads files only).

    python3 benches/trace_compare.py CERT TRUTH.jsonl [--mode bf16] [--top 8]

``TRUTH.jsonl`` is ``benches/step_truth.py --trace N`` output: each shape's fresh process
recorded its allocator history over the build and its first N warm steps. Per shape:

- **fresh, replayed**: that history replayed through afford's allocator model from the
  state it began in (an empty one), against the peaks the process measured after step N-1
  (``peaks_by_step``): does the model reproduce the fresh process?
- **certificate**: the history the certificate's learned sizes write out at the shape,
  replayed from the memory child's starting state (what ``afford size`` answers), and the
  same history replayed from an empty allocator (the child's pre-warmed workspaces left
  out): does the starting state explain a difference?
- **parting**: the two histories aligned allocation by allocation
  (:func:`afford.fit.memory.trace_scaling.align`): how many allocations each makes that the
  other does not, where the first of them lies (op index in the fresh history, and the
  step it falls in), and the largest of them.

Exit 2 on a file that cannot be read; shapes without a trace are skipped with a line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GIB = 2**30


def _steps_at(ops: tuple[int, ...], sizes: tuple[int, ...]) -> list[int]:
    """Op index where each step of the fresh history begins (its steps repeat their sizes:
    :func:`afford.fit.memory.breakdown.find_steps`), or [] when they cannot be found."""
    from afford.fit.memory.breakdown import find_steps
    from afford.fit.memory.trace_scaling import OpTrace

    try:
        st = find_steps(OpTrace(B=1, s=1, sizes=sizes, streams=(0,) * len(sizes), ops=ops))
    except ValueError:
        return []
    first = {o: i for i, o in enumerate(ops) if o >= 0}
    slots = [st.first_step, st.second_step]
    slots += list(range(st.second_step + st.period, len(sizes), st.period))
    return [first[k] for k in slots if k in first]


def compare(cert_path: Path, truth_path: Path, mode: str, top: int) -> list[dict]:
    from afford.figures.memory_figures import find_law
    from afford.fit.memory import allocator as al
    from afford.fit.memory import replay_fit as mr
    from afford.fit.memory.trace_scaling import align
    from afford.schema.cert import load_certificate
    from afford.schema.memory_section import AllocTrace

    cert = load_certificate(cert_path)
    law = find_law(cert, None, mode)
    learned = mr.learn_shapes(list(law.shapes))
    if learned is None:
        raise SystemExit(f"{cert_path}: no traced histories to learn from ({law.workload})")
    seed = learned.traced[0].trace.seed
    rows = []
    for line in truth_path.read_text(encoding="utf-8").splitlines():
        t = json.loads(line)
        b, s = t.get("batch"), t.get("seq")
        if "trace" not in t:
            print(f"{b}x{s}: no trace (run step_truth.py with --trace N)", file=sys.stderr)
            continue
        trace = AllocTrace.model_validate(t["trace"])
        fresh = mr.op_trace(trace, b, s)
        by_step = t.get("peaks_by_step") or []
        n_traced = int(t.get("traced_steps") or 0)
        at = next((x for x in by_step if x[0] == n_traced - 1), None) if n_traced else None
        measured = (at[1], at[2]) if at and len(at) == 3 else \
            (t.get("peak_allocated_bytes"), t.get("peak_reserved_bytes"))
        mine = mr.replay_recorded(trace, b, s)
        synth = learned.model.trace(b, s)
        from_seed = mr.predict(learned.model, seed, b, s)
        from_empty, _ = al.replay(synth.events(mr.KEY_BASE))
        match = align(fresh, synth)
        extra_fresh = [k for k, m in enumerate(match) if m is None]
        matched = {m for m in match if m is not None}
        extra_cert = [k for k in range(synth.n_allocs) if k not in matched]
        starts = _steps_at(fresh.ops, fresh.sizes)
        pos = {o: i for i, o in enumerate(fresh.ops) if o >= 0}
        first = min((pos[k] for k in extra_fresh), default=None)
        step = None if first is None or not starts else \
            sum(1 for x in starts if x <= first) - 1
        rows.append({
            "shape": f"{b}x{s}", "measured": measured,
            "fresh_replayed": (mine.peak_allocated_bytes, mine.peak_reserved_bytes),
            "cert_from_child_state": (from_seed.peak_allocated_bytes,
                                      from_seed.peak_reserved_bytes),
            "cert_from_empty": (from_empty.peak_allocated_bytes,
                                from_empty.peak_reserved_bytes),
            "fresh_only": len(extra_fresh), "cert_only": len(extra_cert),
            "first_parting_op": first, "first_parting_step": step,
            "largest_fresh_only": sorted((fresh.sizes[k] for k in extra_fresh),
                                         reverse=True)[:top],
            "largest_cert_only": sorted((synth.sizes[k] for k in extra_cert),
                                        reverse=True)[:top]})
    return rows


def _gib(pair) -> str:
    a, r = pair
    return "-" if a is None or r is None else f"{a / GIB:.3f} / {r / GIB:.3f}"


def table(rows: list[dict]) -> str:
    out = ["| shape | measured (alloc / reserved GiB) | fresh history replayed | certificate, "
           "child's state | certificate, empty state | fresh-only / cert-only allocations | "
           "first parting (op, step) | largest fresh-only (MiB) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        big = ", ".join(f"{x / 2**20:.1f}" for x in r["largest_fresh_only"]) or "-"
        where = "-" if r["first_parting_op"] is None else \
            f"{r['first_parting_op']}, {r['first_parting_step']}"
        out.append(f"| {r['shape']} | {_gib(r['measured'])} | {_gib(r['fresh_replayed'])} | "
                   f"{_gib(r['cert_from_child_state'])} | {_gib(r['cert_from_empty'])} | "
                   f"{r['fresh_only']} / {r['cert_only']} | {where} | {big} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cert", type=Path)
    ap.add_argument("truth", type=Path, help="step_truth.py --trace N output (JSON lines)")
    ap.add_argument("--mode", default=None, help="the memory law's mode (default: the "
                    "mode the certificate timed the workload in)")
    ap.add_argument("--top", type=int, default=8, help="largest allocations listed per side")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    a = ap.parse_args(argv)
    for p in (a.cert, a.truth):
        if not p.is_file():
            print(f"error: {p}: no such file", file=sys.stderr)
            return 2
    rows = compare(a.cert, a.truth, a.mode, a.top)
    print(table(rows))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
