"""Which transformers causal-LM types afford builds and steps from their default config at
one size (a bench report, not a test): every model type of the installed transformers'
causal-LM mapping as ``hf:TYPE@SIZE``, built on the CPU and stepped twice through afford's
own ``train_step``, each given at most ``--seconds`` (a huge MoE's experts take minutes).

    python3 benches/hf_family_scan.py [--size d128L2H4F256V1000] [--seconds 30] [--only a,b]

A line per type: ``ok``, ``INPUT`` (afford's one-line refusal: bad input, exit 2 in the CLI)
or ``FAIL`` (anything else: the exception and where it was raised), then the counts.
2026-12-07 (day), transformers 5.25, @d128L2H4F256V1000: 121 ok, 60 INPUT, 19 FAIL (a
build refused in one line, or raised inside transformers, or one over 30 s); before the
families without SDPA were built with their eager attention: 108, 75, 17; before afford
filled empty head fields and scaled GPT-J's rotary share: 100, 78, 21 (docs/RESULTS.md,
"2026-12-07" and "2026-12-07 (day)").
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
import warnings
from collections import Counter


def scan_one(model_type: str, size: str) -> tuple[str, str]:
    import torch

    from afford.core.errors import InputError
    from afford.workloads import resolve, train_step

    cpu = torch.device("cpu")
    try:
        w = resolve(f"hf:{model_type}@{size}", "cpu")
        built = w.build({**w.shape(64), "batch": 2}, cpu, 0)
        train_step(built, "fp32", cpu)
        train_step(built, "fp32", cpu)
        return "ok", ""
    except InputError as exc:
        return "INPUT", str(exc).splitlines()[0]
    except BaseException as exc:  # noqa: BLE001 - what raised, and where, is the report
        where = traceback.extract_tb(exc.__traceback__)[-1]
        text = (str(exc).splitlines() or [""])[0]
        return "FAIL", (f"{type(exc).__name__}: {text[:160]} "
                        f"({os.path.basename(where.filename)}:{where.lineno})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="d128L2H4F256V1000")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--only", default="", help="comma-separated model types (default: all)")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    types = [t for t in a.only.split(",") if t] or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)

    def timeout(*_):
        raise TimeoutError(f"over {a.seconds} s")

    signal.signal(signal.SIGALRM, timeout)
    counts: Counter[str] = Counter()
    for t in types:
        signal.alarm(a.seconds)
        try:
            status, why = scan_one(t, a.size)
        finally:
            signal.alarm(0)
        counts[status] += 1
        print(f"{t:28s} {status:5s} {why}", flush=True)
    print(f"{len(types)} types at @{a.size}: " + ", ".join(
        f"{counts[k]} {k}" for k in ("ok", "INPUT", "FAIL")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
