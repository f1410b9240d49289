#!/bin/bash
# The session's last device call (2026-12-06, afternoon; the commit is in log.txt), on an
# H100: the default `afford certify` of this tree against the same command at e069054 (this
# session's start: the 12-step minimum, the refit after the memory stage), on one machine:
# base then new (PAIRS=2: base, new, new, base); then the CUDA-marked tests with the time that is left.
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
r=/tmp/base-run; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'
} >>$log 2>&1
git worktree add -f /tmp/base e069054 >>$log 2>&1 || { echo "no baseline tree" >>$log; }
cert() {  # name src-folder timeout
  t0=$(now)
  (cd "$2" && PYTHONPATH=/tmp/site:$2/src AFFORD_TIMELINE=$r/tl-$1.jsonl timeout $3 \
     python3 -m afford certify --out $r/cert-$1.json >>$log 2>&1)
  echo "certify $1 ($2) rc=$? wall $(since $t0) s" | tee -a $log
  pack
}
cert base-1 /tmp/base 110
cert new-1 $PWD 110
if [ "${PAIRS:-1}" = 2 ]; then
  cert new-2 $PWD 110
  cert base-2 /tmp/base 110
fi
left=$(( ${BUDGET:-300} - $(date +%s) + T0 ))
if [ $left -gt 30 ]; then
  PYTHONPATH=/tmp/site:$PWD/src timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider \
    >$r/pytest-cuda.txt 2>&1
  echo "pytest -m cuda rc=$? (budget $left s)" | tee -a $log
fi
echo "done $(date -u +%FT%TZ)" >>$log
pack
