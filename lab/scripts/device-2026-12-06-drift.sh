#!/bin/bash
# Device call of 2026-12-06 (late evening session; tree 4b0f9ab plus this script): are
# GPT-BigCode's floor truths below its certificate's children because a fresh process runs
# faster than a certify child, or because the machine drifted between certify and truth?
# Fresh-process truths at four floor shapes before the certify and again after it, then the
# contention test (benches: lab/scripts/device-2026-12-06-contend.sh) once. All in
# $OUT/drift.tar.gz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
r=/tmp/drift; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/drift.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
spec=${1:-hf:gpt_bigcode@d1024L16H16F4096V50272}
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
truth() {
  python3 benches/step_truth.py "$spec" --shape 1x256 --shape 2x512 --shape 8x256 \
    --shape 1x3072 --blocks 5 --per-block 10 --profile 0 --out $r/truth-$1.jsonl >>$log 2>&1
  echo "truth $1 rc=$?" | tee -a $log; pack
}
truth before
t0=$(date +%s.%N)
AFFORD_TIMELINE=$r/tl.jsonl python3 -m afford certify -w "$spec" --out $r/cert.json >>$log 2>&1
echo "certify rc=$? wall $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))") s" | tee -a $log
pack
truth after
truth after2
echo "done $(date -u +%FT%TZ)" >>$log; pack
