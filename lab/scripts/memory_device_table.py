"""The README table and the ledger rows of the issue-20 H200 run
(lab/device-runs/2026-12-03-h200-memory, written by lab/scripts/memory_device.py).

    python3 lab/scripts/memory_device_table.py [--ledger lab/history.tsv]

Every law's replay is rebuilt from the raw records by this afford (the run's own stored
replay used an earlier validation tolerance); prints Markdown tables: held-out shapes
(measured, law, replay, errors; expandable segments beside), the replay's validation at the
traced shapes, the stage's wall time, and the 16 GiB budget. With ``--ledger`` appends the
measured peaks and the predictions' errors to the ledger.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path

from afford.certify.stage_replay import build_replay
from afford.schema.memory_section import MemorySection

RUN = Path(__file__).parent / "device-runs" / "2026-12-03-h200-memory"
GIB = 2 ** 30
BASE = {"device": "NVIDIA H200", "torch": "2.11.0+cu130"}
DATE = datetime(2026, 12, 3, 6, 43, tzinfo=timezone.utc)
CMD = "python3 lab/scripts/memory_device.py $OUT --tests"
BUDGET_DATE = datetime(2026, 12, 3, 6, 51, tzinfo=timezone.utc)
BUDGET_CMD = ("python3 lab/scripts/memory_device.py $OUT --budget-only "
              "lab/device-runs/2026-12-03-h200-memory")


def sections() -> dict[str, MemorySection]:
    out = {}
    for n in ("default", "hf"):
        sec = MemorySection.model_validate_json((RUN / f"section-{n}.json").read_text())
        laws = [law.model_copy(update={"replay": build_replay(law)}) for law in sec.laws]
        out[n] = sec.model_copy(update={"laws": laws})
    return out


def expandable_measured() -> dict[tuple[str, str, str], tuple[float, float]]:
    doc = json.loads((RUN / "expandable.json").read_text())
    out = {}
    for it in doc["items"]:
        r = doc["records"][it["key"]]
        if r.get("reserved_by_step"):
            out[(it["workload"], it["mode"], it["role"])] = (r["allocated_by_step"][-1],
                                                            r["reserved_by_step"][-1])
    return out


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.2f} %"


def heldout_table(secs: dict[str, MemorySection]) -> tuple[list[str], list[dict]]:
    exp = expandable_measured()
    lines = ["| workload | mode | B x s | tokens / traced | measured reserved GiB | law GiB "
             "| law error | replay GiB | replay error | allocated: law / replay error "
             "| expandable measured GiB | expandable replay GiB | expandable error |",
             "|" + "---|" * 13]
    rows = []
    for sec in secs.values():
        for law in sec.laws:
            for c in law.replay.heldout:
                em = exp.get((law.workload, law.mode, c.role))
                ee = c.expandable_reserved_bytes / em[1] - 1 if em else None
                lines.append(
                    f"| {law.workload} | {law.mode} | {c.B} x {c.s} | "
                    f"{c.tokens_over_traced:.2f} | {c.measured_reserved_bytes / GIB:.3f} | "
                    f"{c.law_reserved_bytes / GIB:.3f} | {pct(c.law_reserved_error)} | "
                    f"{c.replay_reserved_bytes / GIB:.3f} | {pct(c.reserved_error)} | "
                    f"{pct(c.law_allocated_error)} / {pct(c.allocated_error)} | "
                    + (f"{em[1] / GIB:.3f} | {c.expandable_reserved_bytes / GIB:.3f} | "
                       f"{pct(ee)} |" if em else "- | - | - |"))
                rows.append({"law": law, "c": c, "exp": em, "exp_error": ee})
    return lines, rows


def validation_table(secs: dict[str, MemorySection]) -> list[str]:
    lines = ["| workload | mode | trusted | traced shapes: reserved error (allocated error) "
             "| safety margin | better at held-out | size laws (capped) |", "|" + "---|" * 7]
    for sec in secs.values():
        for law in sec.laws:
            rp = law.replay
            cells = ", ".join(f"{c.B}x{c.s} {pct(c.reserved_error)} ({pct(c.allocated_error)})"
                              for c in rp.validation)
            lines.append(f"| {law.workload} | {law.mode} | {rp.trusted} | {cells} | "
                         f"{pct(rp.safety_margin)} | {rp.better} | "
                         f"{rp.size_laws.get('capped', 0)} |")
    return lines


def budget_table() -> list[str]:
    doc = json.loads((RUN / "budget.json").read_text())
    lines = ["| workload | mode | seq | law's batch | replay's batch (native / expandable) "
             "| safety margin | largest that ran | tried (B: ran?) |", "|" + "---|" * 8]
    for r in doc["results"]:
        tried = ", ".join(f"{t['B']}: {'yes' if t['ok'] else 'OOM'}" for t in r["tried"])
        lines.append(f"| {r['workload']} | {r['mode']} | {r['seq']} | {r['law']} | "
                     f"{r['replay']} / {r['replay_expandable']} | {pct(r['safety_margin'])} | "
                     f"{r['largest_ok']} | {tried} |")
    return lines


def ledger_rows(secs: dict[str, MemorySection], rows: list[dict]) -> list:
    from afford.figures import ledger

    out = []

    def add(q: str, value: float, unit: str, tag: str = "MEASURED", steps: str = "0-2",
            budget: bool = False):
        out.append(ledger.new_reading(
            quantity=q, unit=unit, value=float(value), tag=tag, step_indices=steps,
            command=BUDGET_CMD if budget else CMD, date=BUDGET_DATE if budget else DATE,
            commit="b7c3bec" if budget else "a3b8355", **BASE))

    for name, sec in secs.items():
        add(f"memory/stage/{name}/wall_seconds", sec.wall_seconds, "s", steps="")
        for law in sec.laws:
            for s in law.shapes:
                if s.ok and s.role != "warmup":
                    q = f"memory/{law.workload}/{law.mode}/B={s.dims['B']},s={s.dims['s']}"
                    add(f"{q}/peak_allocated_bytes", s.peak("allocated"), "B")
                    add(f"{q}/peak_reserved_bytes", s.peak("reserved"), "B")
    for r in rows:
        law, c = r["law"], r["c"]
        q = f"memory/{law.workload}/{law.mode}/B={c.B},s={c.s}"
        add(f"{q}/replay_reserved_error", c.reserved_error, "ratio", "MODULE", "")
        add(f"{q}/law_reserved_error", c.law_reserved_error, "ratio", "MODULE", "")
        add(f"{q}/replay_allocated_error", c.allocated_error, "ratio", "MODULE", "")
        if r["exp"]:
            add(f"{q}/expandable/peak_reserved_bytes", r["exp"][1], "B")
            add(f"{q}/expandable/replay_reserved_error", r["exp_error"], "ratio", "MODULE",
                "")
    doc = json.loads((RUN / "budget.json").read_text())
    for r in doc["results"]:
        q = f"memory/budget16GiB/{r['workload']}/{r['mode']}/s={r['seq']}"
        add(f"{q}/predicted_max_batch", r["predicted"], "sequences", "FITTED", "", True)
        add(f"{q}/largest_batch_that_ran", r["largest_ok"], "sequences", "MEASURED", "0-2",
            True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledger", default=None)
    args = ap.parse_args()
    secs = sections()
    held, rows = heldout_table(secs)
    print("\n".join(held))
    print()
    print("\n".join(validation_table(secs)))
    print()
    print("\n".join(budget_table()))
    print()
    for n, sec in secs.items():
        print(f"memory stage {n}: {sec.wall_seconds:.1f} s, "
              f"{sum(len(law.shapes) for law in sec.laws)} shapes")
    errs = [abs(r["c"].reserved_error) for r in rows]
    aerrs = [abs(r["c"].allocated_error) for r in rows]
    lerrs = [abs(r["c"].law_reserved_error) for r in rows]
    eerrs = [abs(r["exp_error"]) for r in rows if r["exp_error"] is not None]
    print(f"held-out worst |error|: replay reserved {max(errs):.2%}, allocated "
          f"{max(aerrs):.2%}; law reserved {max(lerrs):.2%}; expandable replay reserved "
          f"{max(eerrs):.2%} ({len(rows)} shapes)")
    if args.ledger:
        from afford.figures import ledger

        got = ledger_rows(secs, rows)
        ledger.append(args.ledger, got)
        print(f"appended {len(got)} readings to {args.ledger}")


if __name__ == "__main__":
    main()
