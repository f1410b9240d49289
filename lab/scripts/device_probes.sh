#!/usr/bin/env bash
# Device probes on a CUDA machine (issue 4). Runs from the repo root; writes under $OUT.
#  1. the CUDA-marked probe tests;
#  2. the default certify (the default workloads and shapes for this card, probes included):
#     GEMM per dtype, copy bandwidth, startup, and the q3-shaped tinylm (d512 L8 H8,
#     batch 8 x seq 512 on a large GPU) verdict; the probes stage's own wall time;
#  3. a quick certify of the tiny GPT-2 shape (d64 L2 H2, batch 4 x seq 256): its verdict;
#  4. the figures against the H200 references, the summary tables, TSV rows for history.
# Look for: GEMM within 5 % of bf16 762 / fp32 50.7 / tf32 401 / fp16 743 TFLOP/s; copy
# near 4.24-4.3 TB/s; tiny LAUNCH-BOUND, tinylm (q3 shape) not; "probes stage" <= 20 s.
set -uo pipefail
OUT="${OUT:-./out}"
mkdir -p "$OUT"
export PYTHONPATH="$(pwd)/lab/scripts:$(pwd)/src${PYTHONPATH:+:$PYTHONPATH}"
PY=python3
{
  echo "== environment"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  $PY -c "import pynvml; print('nvidia-ml-py present')" 2>/dev/null || echo "nvidia-ml-py absent (nvidia-smi fallback)"
  $PY -c "import transformers; print('transformers', transformers.__version__)" 2>/dev/null || echo "transformers absent"

  echo "== 1. CUDA-marked probe tests"
  timeout 240 $PY -m pytest -q -m cuda -p no:cacheprovider tests/test_probes_gemm.py \
      tests/test_probes_flops.py tests/test_probes_sampler.py 2>&1 | tail -15

  echo "== 2. default certify (timed)"
  t0=$(date +%s%N)
  timeout 420 $PY -m afford certify --out "$OUT/default.json" --force --json > "$OUT/default.summary.json"
  echo "default certify rc=$? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"

  echo "== 3. tiny GPT-2 shape, quick"
  t0=$(date +%s%N)
  timeout 240 $PY -m afford certify -w tiny_gpt:tiny --quick --out "$OUT/tiny.json" --force --json > "$OUT/tiny.summary.json"
  echo "tiny certify rc=$? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"

  echo "== 4. figures"
  ls "$OUT"/default.json "$OUT"/tiny.json 2>/dev/null | xargs -r $PY lab/scripts/probes_report.py "$OUT"
} 2>&1 | tee "$OUT/device_probes.log"
