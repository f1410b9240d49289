#!/bin/bash
# Device call of 2026-12-06 (afternoon session, the commit is in log.txt), on an H100:
#  1. where a sweep child's start-up goes: import torch, CUDA init, the first fp32 and bf16
#     GEMMs (cuBLAS and cuBLASLt load), the first fused AdamW step (torch._dynamo import);
#  2. the default `afford certify` three times (the adaptive rule's 8-step minimum, the
#     ceilings' refit beside the memory stage, the early round without the law);
#  3. `afford certify -w hf:gpt_neox@d1024L16H16F4096V32000` three times;
#  4. the CUDA-marked tests, with what time is left.
# Each step under its own timeout; $OUT/run.tar.gz re-packed after each.
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
r=/tmp/minute; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
python3 - >>$log 2>&1 <<'PY'
import time
t = time.perf_counter(); import torch; a = time.perf_counter() - t
t = time.perf_counter(); torch.cuda.init(); x = torch.ones(8, 8, device="cuda"); torch.cuda.synchronize(); b = time.perf_counter() - t
t = time.perf_counter(); y = x @ x; torch.cuda.synchronize(); c = time.perf_counter() - t
t = time.perf_counter(); xb = x.to(torch.bfloat16); y = torch.nn.functional.linear(xb, xb, xb[0]); torch.cuda.synchronize(); d = time.perf_counter() - t
t = time.perf_counter(); p = torch.nn.Parameter(y.float().sum().reshape(1)); p.grad = torch.ones_like(p); torch.optim.AdamW([p], fused=True).step(); torch.cuda.synchronize(); e = time.perf_counter() - t
print(f"start-up: import torch {a:.2f} s, cuda init {b:.2f} s, first fp32 GEMM {c:.2f} s, first bf16 linear {d:.2f} s, first fused AdamW step {e:.2f} s")
PY
cert() {  # name spec-or-empty timeout
  t0=$(now)
  if [ -n "$2" ]; then w=(-w "$2"); else w=(); fi
  AFFORD_TIMELINE=$r/tl-$1.jsonl timeout $3 python3 -m afford certify "${w[@]}" \
    --out $r/cert-$1.json >>$log 2>&1
  echo "certify $1 ${2:-default} rc=$? wall $(since $t0) s" | tee -a $log
  pack
}
neox=hf:gpt_neox@d1024L16H16F4096V32000
cert default-1 "" 120
cert neox-1 $neox 100
cert default-2 "" 120
cert neox-2 $neox 100
cert default-3 "" 120
cert neox-3 $neox 100
left=$(( 585 - $(date +%s) + T0 ))
if [ $left -gt 30 ]; then
  timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider >$r/pytest-cuda.txt 2>&1
  echo "pytest -m cuda rc=$? (budget $left s)" | tee -a $log
fi
echo "done $(date -u +%FT%TZ)" >>$log
pack
