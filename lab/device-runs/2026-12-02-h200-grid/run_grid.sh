#!/bin/bash
# device: the 2-D time grid for every workload; outputs under $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/benches PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,temperature.gpu --format=csv > $OUT/gpu.txt
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)" >> $OUT/gpu.txt
uptime >> $OUT/gpu.txt
G=benches/device-runs/2026-12-02-h200-grid/time_grid.py; J=$OUT/grid.jsonl
python3 $G tinylm 0 $J 50; python3 $G tinylm 1 $J 40
python3 $G gpt2 0 $J 60; python3 $G gpt2 1 $J 45
python3 $G llama 0 $J 50
python3 $G softmax 0 $J 25; python3 $G scan 0 $J 25
uptime >> $OUT/gpu.txt
