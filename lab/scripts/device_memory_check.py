"""Out-of-selection check of the memory law (a device diagnostic, not a test): the default
tinylm memory job (base 8 x 2048 on a large GPU), plus shapes that played no part in
choosing that base, predicted by the law fitted over the sweep.

    python3 lab/scripts/device_memory_check.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import afford.certify.stage_memory as stage
from afford.measure.memory_sweep import run_memory_child
from afford.workloads import resolve

EXTRA = [(12, 6144), (48, 2048), (8, 12288), (24, 3072)]  # (batch, seq): 3-6x the sweep


def main(out: Path) -> None:
    w = resolve("tinylm", "large-gpu")
    env = SimpleNamespace(device_type="cuda", device_memory_bytes=150_000_000_000)
    rows = []
    for mode in ("fp32", "bf16"):
        job = stage.plan_job("tinylm", w, mode, "large-gpu")
        items = stage.items_for(job, w, 3)
        extra = [{"key": f"extra|{mode}|{b}x{s}", "workload": "tinylm", "mode": mode,
                  "role": "heldout-seq", "shape": {**job.base_shape, "batch": b, "seq": s},
                  "steps": 3} for b, s in EXTRA]
        for it in extra:
            it["dims"] = w.dims(it["shape"])
        rec = run_memory_child(items + extra, device="cuda", device_class="large-gpu", seed=0)
        law = stage.build_law(job, [stage._shape(it, rec[it["key"]]) for it in items], env)
        for it in extra:
            h = stage.heldout(law, stage._shape(it, rec[it["key"]]))
            rows.append({"mode": mode, "dims": h.dims, "allocated_error": h.error,
                         "reserved_error": h.reserved_error,
                         "measured_bytes": h.measured_bytes,
                         "measured_reserved_bytes": h.measured_reserved_bytes})
            print(f"{mode} B {h.dims['B']:>3} x s {h.dims['s']:>5}: allocated {h.error:+.2%}, "
                  f"reserved {h.reserved_error:+.2%} "
                  f"(measured {h.measured_bytes / 2**30:.2f} / "
                  f"{h.measured_reserved_bytes / 2**30:.2f} GiB)", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory-check.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out"))
