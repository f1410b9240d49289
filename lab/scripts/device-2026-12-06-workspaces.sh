#!/bin/bash
# Device call of 2026-12-06 (afternoon session; the commit is in log.txt), on an H100:
#  1. does torch._C._cuda_clearCublasWorkspaces + empty_cache give every reserved byte back
#     after a bf16 GEMM and a fused AdamW step (what MemoryWindow.open now does per point);
#  2. `afford certify -w hf:llama@d1024L16H16K8F2816V32000+lora=r16` with the change, and its
#     fresh-process truths at its measured memory shapes and beyond (benches/step_truth.py),
#     for benches/memory_answer_truth.py offline;
#  3. the default `afford certify` under cProfile (where the parent's seconds go);
#  4. Gemma (../shared/recorded/h200-2026-12-06/cfg/gemma, copied beside this run) certified
#     and timed fresh at 1 x 512 and 2 x 512, where the recorded H200 certificate's replay
#     read 4.4 % under the fresh process.
# Each step under its own timeout; $OUT/run.tar.gz re-packed after each.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
here=$PWD; r=/tmp/ws; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
python3 - >>$log 2>&1 <<'PY'
import torch
d = torch.device("cuda")
x = torch.randn(1024, 1024, device=d, dtype=torch.bfloat16)
y = torch.nn.functional.linear(x, x, x[0]); p = torch.nn.Parameter(y.float().sum().reshape(1))
p.grad = torch.ones_like(p); torch.optim.AdamW([p], fused=True).step(); torch.cuda.synchronize()
del x, y, p
torch.cuda.empty_cache()
print("after empty_cache: allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved())
torch._C._cuda_clearCublasWorkspaces(); torch.cuda.empty_cache()
print("after clearCublasWorkspaces: allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved())
PY
cert() {  # name spec timeout [extra args]
  t0=$(now)
  AFFORD_TIMELINE=$r/tl-$1.jsonl timeout $3 python3 -m afford certify -w "$2" \
    --out $r/cert-$1.json >>$log 2>&1
  echo "certify $1 $2 rc=$? wall $(since $t0) s" | tee -a $log
  pack
}
lora='hf:llama@d1024L16H16K8F2816V32000+lora=r16'
cert lora "$lora" 150
t0=$(now); timeout 90 python3 benches/step_truth.py "$lora" --shape 8x256 --shape 2x512 \
  --shape 4x512 --shape 16x256 --shape 2x2048 --warm 3 --blocks 2 --profile 0 \
  --out $r/lora-truth.jsonl >>$log 2>&1
echo "lora truth rc=$? wall $(since $t0) s" | tee -a $log
pack
t0=$(now)
AFFORD_TIMELINE=$r/tl-default.jsonl timeout 150 python3 -m cProfile -o $r/prof-default.out \
  -m afford certify --out $r/cert-default.json >>$log 2>&1
echo "certify default (cProfile) rc=$? wall $(since $t0) s" | tee -a $log
pack
cp -r lab/device-runs/2026-12-06-h100-workspaces/cfg $r/ && cd $r
cert gemma hf:cfg/gemma/config.json 150
t0=$(now); timeout 60 python3 $here/benches/step_truth.py hf:cfg/gemma/config.json --shape 1x512 \
  --shape 2x512 --warm 3 --blocks 2 --profile 0 --out $r/gemma-truth.jsonl >>$log 2>&1
echo "gemma truth rc=$? wall $(since $t0) s" | tee -a $log
echo "done $(date -u +%FT%TZ)" >>$log
pack
