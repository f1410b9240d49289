"""Whether a point's idle step (the median of the steps whose threads did not wait for a CPU)
states the same step whatever the load beside it: tinylm at 4 x 32 and 4 x 128, one real
sweep child per load, with 0 .. N busy loops started beside it, ``--repeat`` times over. Each
idle step is printed against the one with no busy loop of the same repeat, with the load
average as the child ended.

A figure of the box, not a test: a thread that never waits still runs slower beside a busy
loop on a core that shares its cache, its memory bus or its physical core, and the idle step
then reads slow by what no wait records. The certificate states the idle step as measured.

    PYTHONPATH=src python3 benches/contention_idle.py [--loads 0,1,2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from statistics import median

from afford.certification.sweep import assemble_point

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.burners import (  # noqa: E402
    EVERY_CORE_RULE,
    FREE_RULE,
    measure_at_load,
    tinylm_items,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cores = os.cpu_count() or 1
    ap.add_argument("--loads", default=",".join(str(n) for n in range(cores + 1)),
                    help="busy loops beside the child, comma-separated (default 0 .. cores)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    loads = [int(x) for x in a.loads.split(",")]
    ratios: dict[tuple[int, str], list[float]] = {}
    print(f"{cores} cores; tinylm fp32 batch 4; idle / idle with no busy loop, same repeat")
    for r in range(a.repeat):
        base: dict[str, float] = {}
        for n in loads:
            rule = EVERY_CORE_RULE if n >= cores else FREE_RULE
            got, load = measure_at_load(n, tinylm_items(), rule)
            for key, ev in sorted(got.items()):
                p = assemble_point(int(key.rsplit("|", 1)[1]), [ev], None)
                if n == 0 and p.idle_seconds:
                    base[key] = p.idle_seconds
                ratio = (p.idle_seconds / base[key]) if p.idle_seconds and key in base else None
                if ratio is not None and n:
                    ratios.setdefault((n, key), []).append(ratio)
                share = f"{p.wait_share:.2f}" if p.wait_share is not None else "  - "
                idle = f"{p.idle_seconds * 1e3:7.2f} ms" if p.idle_seconds else "   none   "
                print(f"repeat {r} busy {n} load {load:5.2f} {key:16s} wall "
                      f"{p.median_seconds * 1e3:7.2f} ms  wait share {share}  idle {idle}"
                      + (f"  x{ratio:.2f}" if ratio is not None and n else ""))
    print("median idle ratio against no busy loop (repeats with free steps at both):")
    for (n, key), rs in sorted(ratios.items()):
        print(f"  busy {n} {key:16s} x{median(rs):.2f}  over {len(rs)}  "
              f"(range {min(rs):.2f}-{max(rs):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
