"""Where certify's wall time went, from an AFFORD_TIMELINE file (afford.measure.timeline):
stage boundaries and, per child process, when its job was sent, when it started measuring
(its start event), each point, and its exit, in seconds since the console script began.

    python3 benches/timeline_report.py timeline.jsonl
"""

from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    lines = [json.loads(x) for x in open(path, encoding="utf-8") if x.strip()]
    t0 = next((x["wall"] for x in lines if x["what"] == "entry"), lines[0]["wall"])
    last_point: dict[int, float] = {}
    for x in lines:
        t = x["wall"] - t0
        if x["what"] == "stage":
            extra = f" (set-up {x['setup_seconds']:.1f} s)" if "setup_seconds" in x else ""
            print(f"{t:7.2f}  == stage {x['name']}{extra}")
        elif x["what"] == "job":
            print(f"{t:7.2f}  pid {x['pid']}: job sent (child {x.get('child')}, "
                  f"round {x.get('round')})")
            last_point[x["pid"]] = t
        elif x["what"] == "event" and x.get("event") in ("start", "done"):
            print(f"{t:7.2f}  pid {x['pid']}: {x['event']}")
            last_point[x["pid"]] = t
        elif x["what"] == "event" and x.get("event") == "point":
            gap = t - last_point.get(x["pid"], t)
            last_point[x["pid"]] = t
            print(f"{t:7.2f}  pid {x['pid']}:   point {x.get('key')} (+{gap:.2f} s)")
        elif x["what"] == "exit":
            print(f"{t:7.2f}  pid {x['pid']}: exit {x.get('rc')}")


if __name__ == "__main__":
    main(sys.argv[1])
