#!/bin/bash
# Device call of 2026-12-06 (night session; the commit is in log.txt): why every process on the
# device's image compiles its modules from source, what a bytecode cache would save a
# process's start, and certify's stages at this commit (the baseline of the session):
#   1. the interpreter's bytecode facts (dont_write_bytecode, pycache_prefix, whether torch's
#      package folder holds bytecode and may be written);
#   2. import torch (and transformers) in fresh processes: plain, twice; with
#      PYTHONPYCACHEPREFIX=/tmp/pyc, three times (the first fills it);
#   3. the parts of a profiled point (lab/scripts/profile_overhead.py);
#   4. certify -w $SPEC at the session's start (.base/src, e2782a7), then at this tree twice
#      (the first fills afford's bytecode cache, the second reads it), then the default at
#      this tree; each with its timeline, skipped when the call's BUDGET cannot hold it.
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
r=/tmp/pyc-run; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.2f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc; env | grep -i -E 'python|pyc' ; which python3
} >>$log 2>&1
python3 - >>$log 2>&1 <<'PY'
import importlib.util, os, sys
print("dont_write_bytecode", sys.flags.dont_write_bytecode, "pycache_prefix", sys.pycache_prefix,
      "version", sys.version.split()[0])
for name in ("torch", "transformers", "numpy", "afford"):
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        print(name, "not found"); continue
    d = os.path.dirname(spec.origin)
    cache = importlib.util.cache_from_source(spec.origin)
    npy = npyc = 0
    for root, dirs, files in os.walk(d):
        npy += sum(f.endswith(".py") for f in files)
        npyc += sum(f.endswith(".pyc") for f in files)
    print(name, d, "pyc of __init__ exists", os.path.exists(cache), "folder writable",
          os.access(d, os.W_OK), "py", npy, "pyc", npyc)
PY
imp() {  # label env...
  local label=$1; shift
  t0=$(now); env "$@" python3 -c 'import torch' >/dev/null 2>&1
  a=$(since $t0); t0=$(now)
  env "$@" PYTHONPATH=/tmp/site python3 -c 'import torch, transformers; from transformers import AutoConfig; AutoConfig.for_model("opt")' >/dev/null 2>&1
  echo "$label: import torch $a s; torch+transformers+config $(since $t0) s" | tee -a $log
}
[ "${PLAN:-hf}" = default ] || { imp plain-1; imp prefix-1 PYTHONPYCACHEPREFIX=/tmp/pyc; imp prefix-2 PYTHONPYCACHEPREFIX=/tmp/pyc; }
pack
BUDGET=${BUDGET:-480}
left() { echo $(( BUDGET - $(date +%s) + T0 )); }
export AFFORD_CACHE_DIR=/tmp/afford-cache
cert() {  # name src timeout [-w SPEC]
  local name=$1 src=$2 t=$3; shift 3
  if [ "$(left)" -lt "$t" ]; then echo "certify $name skipped: $(left) s left" | tee -a $log; return 1; fi
  t0=$(now)
  PYTHONPATH=/tmp/site:$src AFFORD_TIMELINE=$r/tl-$name.jsonl timeout $t \
    python3 -m afford certify "$@" --out $r/cert-$name.json >>$log 2>&1
  echo "certify $name $* rc=$? wall $(since $t0) s" | tee -a $log
  pack
}
SPEC=${SPEC:-hf:opt@d1024L16H16F4096V50272}
[ "${PLAN:-hf}" = default ] || PYTHONPATH=/tmp/site:$PWD/src timeout 120 python3 lab/scripts/profile_overhead.py \
  "$SPEC|512" "$SPEC|256|32" "tinylm|1024" "tinylm|8192" "softmax|1024" "scan|512" \
  >$r/profile-overhead.jsonl 2>>$log
echo "profile_overhead rc=$?" | tee -a $log
pack
if [ "${PLAN:-hf}" = default ]; then  # the second call: the default, start and now
  cert default-base-1 $PWD/.base/src 100
  cert default-new-1 $PWD/src 100   # fills afford's bytecode cache
  cert default-new-2 $PWD/src 100   # reads it
else
  cert hf-base-1 $PWD/.base/src 130 -w "$SPEC"
  cert hf-new-1 $PWD/src 130 -w "$SPEC"     # fills afford's bytecode cache
  cert hf-new-2 $PWD/src 130 -w "$SPEC"     # reads it
  cert default-new-3 $PWD/src 130
fi
ls $AFFORD_CACHE_DIR/bytecode >/dev/null 2>&1 && echo "bytecode cache: $(find $AFFORD_CACHE_DIR/bytecode -name '*.pyc' | wc -l) files, $(du -sh $AFFORD_CACHE_DIR/bytecode | cut -f1)" | tee -a $log
echo "done $(date -u +%FT%TZ) after $(( $(date +%s) - T0 )) s" >>$log
pack
