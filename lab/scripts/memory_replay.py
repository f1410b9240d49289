"""Reserved memory by replaying the caching allocator, checked offline on H200 traces
(issue 20, part 1; a bench, not a test).

    python3 lab/scripts/memory_replay.py [TRACE_DIR]

TRACE_DIR (default ``lab/device-runs/2026-12-02-h200-traces``) holds what
``mem_trace.py`` there recorded: per workload (tinylm q3, a transformers GPT-2 124M, a
Llama d768 L12 H12 kv4) and mode (fp32, bf16 autocast), one process that ran six shapes in
order, each after ``gc``, ``empty_cache`` and ``reset_peak_memory_stats``, with the
allocator's history of build + 3 training steps; and ``expandable.txt``, the peaks of the
same bf16 runs under ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.

1. Validation: every recorded history is replayed through :mod:`afford.fit.memory.allocator`,
   the process as it ran (each shape starting from the allocator state the one before left:
   its cuBLAS workspaces stay), with the driver's segment addresses; the replay's peaks,
   segments and block addresses are compared with the recorded ones.
2. Prediction: the first three shapes are the traced ones, the last three held out (up to
   4x the tokens). :mod:`afford.fit.memory.trace_scaling` learns each allocation's size from the
   traced histories and writes the history out at each held-out shape; it is replayed from
   the state the process had (the traced shapes replayed, then the predicted ones), with
   addresses of its own. Beside it, the memory law of :mod:`afford.fit.memory.memory_fit` fitted to the
   traced shapes' peaks as afford fits it (``fit_memory``; states = 16 B per parameter:
   weights, gradients and AdamW's two moments in fp32; no s^2 term: every workload declares
   fused attention). For bf16 also the expandable-segments replay beside its measurement.
3. Where the memory goes at the peak of each held-out shape's predicted history.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

from afford.fit.memory.allocator import AddressSource, Allocator, replay
from afford.fit.memory.breakdown import CLASSES, MemoryBreakdown, breakdown
from afford.fit.memory.memory_fit import MemoryObservation, fit_memory
from afford.fit.memory.trace_scaling import OpTrace, TraceModel, extra_slots, from_history, learn

HERE = Path(__file__).parent
DEFAULT_DIR = HERE / "device-runs" / "2026-12-02-h200-traces"
WORKLOADS = {"tinylm": (512, 8, 8), "gpt2": (768, 12, 12), "llama": (768, 12, 12)}  # d L H
MODES = ("fp32", "bf16")
TRACED = 3
STATES_BYTES_PER_PARAM = 16.0
MIB = 2 ** 20


def load(trace_dir: Path, workload: str, mode: str) -> list[dict]:
    with gzip.open(trace_dir / f"trace-{workload}-{mode}.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh]


def load_expandable(trace_dir: Path) -> dict[tuple[str, int, int], tuple[int, int]]:
    """(workload, B, s) -> (peak allocated, peak reserved) of the expandable-segments run."""
    out = {}
    for line in (trace_dir / "expandable.txt").read_text().splitlines():
        p = line.split()
        if len(p) >= 7 and p[2].startswith("expandable_segments"):
            out[(p[0], int(p[3]), int(p[4]))] = (int(p[5]), int(p[6]))
    return out


class Process:
    """One process's allocator across its shapes: each shape replayed from the state the
    last one left; between shapes everything is freed but the first shape's kept blocks
    (what the first history allocated that no later one does, and never freed), then the
    cache emptied."""

    def __init__(self, expandable: bool, keep: list[int]) -> None:
        self.alloc = Allocator(expandable=expandable)
        self.keep = keep  # slots of the first history (key base 0)

    def run(self, trace: OpTrace, index: int, addresses: list[int] | None = None,
            recorded_blocks: list[int] | None = None) -> dict:
        """Replay one shape; with ``recorded_blocks`` (the recorded address of each
        allocation) count the blocks the model put elsewhere."""
        self.alloc.addresses = AddressSource(addresses or ())
        base = index << 32
        wrong = [0]

        def check(ev, block) -> None:
            wrong[0] += block.addr != recorded_blocks[ev.key - base]

        res, _ = replay(trace.events(base), allocator=self.alloc,
                        on_alloc=check if recorded_blocks is not None else None)
        self.alloc.teardown(self.keep)
        return {"allocated": res.peak_allocated_bytes, "reserved": res.peak_reserved_bytes,
                "segments": [b for _, b in res.segments],
                "misplaced": wrong[0] if recorded_blocks is not None else None}


def segment_addresses(record: dict) -> list[int]:
    return [e[1] for e in record["events"] if e[0] == "segment_alloc"]


def kept_slots(traces: list[OpTrace]) -> list[int]:
    """What the first history allocates that the second has no match for, never freed:
    the process's workspaces."""
    freed = traces[0].freed()
    return [k for k in extra_slots(traces[1], traces[0]) if k not in freed]


def law_predictions(records: list[dict], workload: str, mode: str) -> dict[str, list[float]]:
    d, L, H = WORKLOADS[workload]
    out = {}
    for quantity, key in (("allocated", "peak_alloc"), ("reserved", "peak_reserved")):
        obs = [MemoryObservation(B=r["B"], s=r["s"], d=d, L=L, H=H,
                                 states_bytes=STATES_BYTES_PER_PARAM * r["params"],
                                 peak_bytes=float(r[key])) for r in records[:TRACED]]
        fit = fit_memory(obs, quantity, s2_term=False)
        out[quantity] = [fit.predict(STATES_BYTES_PER_PARAM * r["params"], r["B"], r["s"],
                                     d, L, H) for r in records]
        out[quantity + "_form"] = fit.name
    return out


def evaluate(trace_dir: Path, workload: str, mode: str, expandable_peaks: dict) -> dict:
    records = load(trace_dir, workload, mode)
    traces = [from_history(r["B"], r["s"], r["events"]) for r in records]
    keep = kept_slots(traces)
    # learn on the traced shapes, the first warm one as reference (the held-out shapes run
    # warm: their process already holds the workspaces)
    order = [1, 0] + list(range(2, TRACED))
    model = learn([traces[i] for i in order], reference=0)
    replayed, native = Process(False, keep), Process(False, keep)
    replayed_exp, exp = Process(True, keep), Process(True, keep)
    rows = []
    for i, (r, t) in enumerate(zip(records, traces)):
        segs = segment_addresses(r)
        blocks = [e[1] for e in r["events"] if e[0] == "alloc"]
        target = t if i < TRACED else model.trace(r["B"], r["s"])
        bf16 = mode == "bf16"
        rows.append({
            "B": r["B"], "s": r["s"], "traced": i < TRACED,
            "measured": {"allocated": r["peak_alloc"], "reserved": r["peak_reserved"]},
            "replay": replayed.run(t, i, segs, blocks),
            "recorded_segments": [e[2] for e in r["events"] if e[0] == "segment_alloc"],
            "predicted": native.run(target, i, segs if i < TRACED else None),
            "expandable_replay": replayed_exp.run(t, i) if bf16 else None,
            "expandable": exp.run(target, i) if bf16 else None,
            "expandable_measured": expandable_peaks.get((workload, r["B"], r["s"]))})
    laws = law_predictions(records, workload, mode)
    for k, row in enumerate(rows):
        row["law"] = {q: laws[q][k] for q in ("allocated", "reserved")}
    return {"workload": workload, "mode": mode, "rows": rows, "model": model.summary(),
            "warnings": model.warnings, "kept_bytes": sum(traces[0].sizes[k] for k in keep),
            "law_forms": {q: laws[q + "_form"] for q in ("allocated", "reserved")},
            "breakdown": explain_last(records, traces, model, keep)}


def explain_last(records: list[dict], traces: list[OpTrace], model: TraceModel,
                 keep: list[int]) -> MemoryBreakdown:
    """The breakdown of the last shape's predicted history, replayed from the state the
    process had (so its workspaces count)."""
    proc = Process(False, keep)
    for i, (r, t) in enumerate(zip(records[:-1], traces)):
        proc.run(t if i < TRACED else model.trace(r["B"], r["s"]), i,
                 segment_addresses(r) if i < TRACED else None)
    last = records[-1]
    return breakdown(model.trace(last["B"], last["s"]), allocator=proc.alloc)


def past_the_cap(trace_dir: Path) -> list[tuple[str, int, int, float, float]]:
    """tinylm learned from (8, 1024), (4, 2048), (8, 2048): the last is past the 132 MiB
    cap of its two backward buffers per layer; (16, 2048) and (8, 4096) predicted."""
    out = []
    for mode in MODES:
        records = load(trace_dir, "tinylm", mode)
        traces = [from_history(r["B"], r["s"], r["events"]) for r in records]
        model = learn(traces[1:4], reference=0)
        proc = Process(False, kept_slots(traces))
        for i, (r, t) in enumerate(zip(records, traces)):
            got = proc.run(t if i < 4 else model.trace(r["B"], r["s"]), i,
                           segment_addresses(r) if i < 4 else None)
            if i >= 4:
                out.append((mode, r["B"], r["s"], err(got["allocated"], r["peak_alloc"]),
                            err(got["reserved"], r["peak_reserved"])))
    return out


def err(pred: float, meas: float) -> float:
    return pred / meas - 1.0


def pct(x: float | None) -> str:
    return "      -" if x is None else f"{100 * x:+6.2f}%"


def gib(x: float | None) -> str:
    return "     -" if x is None else f"{x / 2 ** 30:6.3f}"


def print_validation(results: list[dict]) -> None:
    print("Replay validation: each recorded history replayed through the allocator model "
          "(process order, recorded segment addresses); bf16 also through the "
          "expandable-segments model against the expandable run's peaks. Differences "
          "replay - measured, in bytes.")
    print(f"{'workload':8} {'mode':4} {'B x s':>9} {'alloc':>6} {'res':>6} "
          f"{'segments model/rec':>18} {'same sizes':>10} {'misplaced':>9} | "
          f"{'exp alloc':>9} {'exp res':>8}")
    for res in results:
        for row in res["rows"]:
            m, rp = row["measured"], row["replay"]
            same = rp["segments"] == row["recorded_segments"]
            exp = ""
            if row["expandable_replay"] and row["expandable_measured"]:
                ea, er = row["expandable_measured"]
                exp = (f" | {row['expandable_replay']['allocated'] - ea:>+9d} "
                       f"{row['expandable_replay']['reserved'] - er:>+8d}")
            print(f"{res['workload']:8} {res['mode']:4} {row['B']:>4}x{row['s']:<4} "
                  f"{rp['allocated'] - m['allocated']:>+6d} {rp['reserved'] - m['reserved']:>+6d} "
                  f"{len(rp['segments']):>8}/{len(row['recorded_segments']):<9} "
                  f"{'yes' if same else 'NO':>10} {rp['misplaced']:>9}{exp}")
    print("('misplaced': blocks the model put at another address than PyTorch did)")
    print()


def print_heldout(results: list[dict]) -> dict[str, list[float]]:
    print("Held-out shapes (GiB; errors = predicted / measured - 1). Law: fit_memory on the "
          "3 traced peaks. Replay: synthesised history through the allocator model.")
    print(f"{'workload':8} {'mode':4} {'B x s':>9} {'tok x':>5} {'meas A':>6} {'meas R':>6} "
          f"{'law A':>8} {'law R':>6} {'err':>8} {'replay A':>8} {'replay R':>8} {'err':>8}"
          f" | {'exp meas R':>10} {'exp pred R':>10} {'err':>8}")
    errs: dict[str, list[float]] = {k: [] for k in
                                    ("law_A", "law_R", "replay_A", "replay_R", "exp_R",
                                     "exp_A")}
    for res in results:
        tokens0 = max(r["B"] * r["s"] for r in res["rows"] if r["traced"])
        for row in (r for r in res["rows"] if not r["traced"]):
            m, law, p = row["measured"], row["law"], row["predicted"]
            e = {"law_A": err(law["allocated"], m["allocated"]),
                 "law_R": err(law["reserved"], m["reserved"]),
                 "replay_A": err(p["allocated"], m["allocated"]),
                 "replay_R": err(p["reserved"], m["reserved"])}
            exp_txt = ""
            if row["expandable"] and row["expandable_measured"]:
                ea, er = row["expandable_measured"]
                e["exp_R"] = err(row["expandable"]["reserved"], er)
                e["exp_A"] = err(row["expandable"]["allocated"], ea)
                exp_txt = (f" | {gib(er):>10} {gib(row['expandable']['reserved']):>10} "
                           f"{pct(e['exp_R']):>8}")
            for k, v in e.items():
                errs[k].append(v)
            print(f"{res['workload']:8} {res['mode']:4} {row['B']:>4}x{row['s']:<4} "
                  f"{row['B'] * row['s'] / tokens0:5.1f} {gib(m['allocated'])} "
                  f"{gib(m['reserved'])} {pct(e['law_A']):>8} {gib(law['reserved'])} "
                  f"{pct(e['law_R']):>8} {pct(e['replay_A']):>8} {gib(p['reserved']):>8} "
                  f"{pct(e['replay_R']):>8}{exp_txt}")
    print("('tok x': tokens over the largest traced shape's; 'law A' and 'replay A' are the "
          "allocated errors)")
    print()
    return errs


def print_summary(errs: dict[str, list[float]], results: list[dict]) -> None:
    print("Held-out |error|: worst / median (targets: reserved 3 %, allocated 2 %)")
    names = {"law_R": "law, reserved", "replay_R": "replay, reserved",
             "law_A": "law, allocated", "replay_A": "replay, allocated",
             "exp_R": "replay, expandable reserved (bf16)",
             "exp_A": "replay, expandable allocated (bf16)"}
    for k, name in names.items():
        a = [abs(v) for v in errs[k]]
        print(f"  {name:38} {100 * max(a):6.2f} % / {100 * statistics.median(a):5.2f} %"
              f"   ({len(a)} shapes)")
    for res in results:
        print(f"  {res['workload']} {res['mode']}: law forms {res['law_forms']}; "
              f"kept between shapes {res['kept_bytes'] / MIB:.1f} MiB; size laws "
              f"{res['model']}")
    print()


def print_breakdown(results: list[dict]) -> None:
    print("Where the memory goes at the predicted peak of the largest held-out shape "
          "(share of reserved at that moment; native allocator, the process's state)")
    head = " ".join(f"{c[:11]:>11}" for c in (*CLASSES, "slack"))
    print(f"{'workload':8} {'mode':4} {'B x s':>9} {'reserved':>8} {head}")
    for res in results:
        b = res["breakdown"]
        shares = b.shares()
        cells = " ".join(f"{100 * shares[c]:10.1f}%" for c in (*CLASSES, "slack"))
        print(f"{res['workload']:8} {res['mode']:4} {b.B:>4}x{b.s:<4} "
              f"{gib(b.reserved_bytes):>8} {cells}")
    print()


def main(argv: list[str]) -> None:
    trace_dir = Path(argv[0]) if argv else DEFAULT_DIR
    expandable_peaks = load_expandable(trace_dir)
    results = [evaluate(trace_dir, w, m, expandable_peaks) for w in WORKLOADS for m in MODES]
    print_validation(results)
    errs = print_heldout(results)
    print_summary(errs, results)
    print_breakdown(results)
    print("tinylm traced at (8,1024) (4,2048) (8,2048), past its backward buffers' cap "
          "(allocated / reserved error):")
    for mode, B, s, ea, er in past_the_cap(trace_dir):
        print(f"  {mode} {B}x{s}: {pct(ea)} / {pct(er)}")


if __name__ == "__main__":
    main(sys.argv[1:])
