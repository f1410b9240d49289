#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/benches/device-runs/2026-12-02-h200-traces PYTHONUNBUFFERED=1
M=benches/device-runs/2026-12-02-h200-traces/mem_trace.py
for w in tinylm gpt2 llama; do for m in fp32 bf16; do python3 $M $w $m $OUT/trace-$w-$m.jsonl.gz || echo FAIL $w $m; done; done
for w in tinylm gpt2 llama; do PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 $M $w bf16 /tmp/exp-$w.jsonl.gz notrace; done 2>&1 | tee $OUT/expandable.txt
ls -la $OUT
