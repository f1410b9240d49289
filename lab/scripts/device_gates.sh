#!/usr/bin/env bash
# Determinism audit and gates on a CUDA box (issue 5). Run from the repository root:
#     OUT=./out bash lab/scripts/device_gates.sh
# Needs python3 with torch built for CUDA; PYTHONPATH gets src (and . for the test suite).
# Writes under $OUT (default ./out):
#   gates_env.txt           torch, CUDA, device, CUBLAS_WORKSPACE_CONFIG of the shell
#   gate_cuda.json          `afford gate --device cuda --json`: audit (flag off/on) of
#                           softmax, scan, tinylm; init-loss; CPU/CUDA parity; noise floor
#   gate_cuda.txt           the same, rendered as tables (determinism, noise floor, gates)
#   gate_cuda.stderr        FAIL / NOT EXECUTABLE lines and notes
#   gate_cpu.json/.txt      the same on this box's CPU (parity is CUDA vs CPU, so it runs
#                           in the CUDA report only)
#   gates_history.tsv       one line per figure, for lab/history.tsv
#   pytest_cuda.txt         the CUDA-marked tests of this issue (parity on the GPU)
#   *.rc, *.time            exit code (0 GO, 1 HALT, 2 input, 3 measurement) and wall time
# About 1-2 minutes on an H200; every command has its own timeout. GATE_EXTRA adds flags to
# both `afford gate` runs (a smoke test: GATE_EXTRA="-w softmax --repeats 2 --steps 2").
set -u
OUT="${OUT:-./out}"
mkdir -p "$OUT"
export PYTHONPATH="src:.${PYTHONPATH:+:$PYTHONPATH}"
export COLUMNS=200

python3 - > "$OUT/gates_env.txt" 2>&1 <<'PY'
import os, torch
print("torch", torch.__version__, "cuda", torch.version.cuda,
      "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(), "cc", torch.cuda.get_device_capability())
print("CUBLAS_WORKSPACE_CONFIG", os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
PY

run_gate() {  # name, timeout seconds, afford gate arguments...
    local name="$1" limit="$2"; shift 2
    local t0=$SECONDS
    # shellcheck disable=SC2086  # GATE_EXTRA: extra flags for a smoke test, e.g. "-w softmax"
    timeout "$limit" python3 -m afford gate --json "$@" ${GATE_EXTRA:-} \
        > "$OUT/$name.json" 2> "$OUT/$name.stderr"
    echo $? > "$OUT/$name.rc"
    echo "$((SECONDS - t0)) s" > "$OUT/$name.time"
    python3 - "$OUT/$name.json" > "$OUT/$name.txt" 2>&1 <<'PY'
import json, sys
from afford.cli.gate import render_sections
from afford.schema.determinism_section import DeterminismSection, GatesSection
doc = json.load(open(sys.argv[1]))
d = doc["sections"]["determinism"]
render_sections(DeterminismSection.model_validate(d) if d else None,
                GatesSection.model_validate(doc["sections"]["gates"]))
PY
}

run_gate gate_cuda 300 --device cuda
run_gate gate_cpu 150 --device cpu

python3 - "$OUT" > "$OUT/gates_history.tsv" 2>&1 <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("\t".join(["device", "torch", "what", "workload", "flag", "quantity", "value", "unit",
                 "tag", "note"]))
for name in ("gate_cuda", "gate_cpu"):
    try:
        doc = json.loads((out / f"{name}.json").read_text())
    except Exception as exc:
        print(f"{name}\t-\tmissing\t-\t-\t-\t-\t-\t-\t{exc}")
        continue
    g, d = doc["sections"]["gates"], doc["sections"]["determinism"]
    dev, tv = g["device_name"], g["torch_version"]
    for run in (d or {}).get("runs", []):
        flag = "on" if run["deterministic"] else "off"
        if run["not_executable"]:
            print(f"{dev}\t{tv}\taudit\t{run['workload']}\t{flag}\t-\tNOT EXECUTABLE\t-\t"
                  f"MEASURED\top={run['op']} stage={run['stage']}")
            continue
        for c in run["comparisons"]:
            print(f"{dev}\t{tv}\taudit\t{run['workload']}\t{flag}\t{c['quantity']}\t"
                  f"{'bitwise' if c['bitwise_equal'] else 'differs'} max|d|={c['max_abs_delta']}"
                  f"\t-\tMEASURED\t{run['repeats']} repeats at {run['value']} ({run['mode']})")
        if run["timing"]:
            print(f"{dev}\t{tv}\taudit\t{run['workload']}\t{flag}\twarm step\t"
                  f"{run['timing']['median_seconds']}\ts\tMEASURED\tmedian of "
                  f"{len(run['timing']['timed_seconds'])}")
    for r in g["readings"]["noise_floor"]:
        if r["losses_a"]:
            print(f"{dev}\t{tv}\tnoise floor\t{r['workload']}\t-\tsame seed |d final loss|\t"
                  f"{abs(r['losses_a'][-1] - r['losses_a_again'][-1])}\tloss\tMEASURED\t"
                  f"bitwise={r['params_bitwise_equal']}; between seeds "
                  f"{abs(r['losses_a'][-1] - r['losses_b'][-1])}; {r['steps']} steps")
    for gate in doc["gates"]:
        print(f"{dev}\t{tv}\tgate\t{gate['name']}\t-\t{gate['worst_row']}\t{gate['delta']}\t"
              f"tol {gate['tolerance']}\tMODULE\t{gate['status']}")
PY

timeout 180 python3 -m pytest -q -m cuda tests/test_gate_measure.py > "$OUT/pytest_cuda.txt" 2>&1
echo $? > "$OUT/pytest_cuda.rc"
for f in gate_cuda gate_cpu pytest_cuda; do
    echo "$f: exit $(cat "$OUT/$f.rc") $(cat "$OUT/$f.time" 2>/dev/null)"
done
