#!/usr/bin/env bash
# A plan at a shape the certificate did not measure (issue 19 item 2, issue 15 item 3):
#   afford plan CERT --platform examples/platforms/16gib-12h.toml --run examples/runs/any-shape.toml
#   afford preflight ... (NO-GO on a NOISY certificate), and with --accept-noisy
#   afford predict CERT --batch 20 --seq 4096 --platform examples/platforms/16gib-12h.toml
# Usage: lab/scripts/plan_any_shape.sh CERT [OUTDIR]   (OUTDIR defaults to lab/plans/)
set -euo pipefail
cert=${1:?usage: lab/scripts/plan_any_shape.sh CERT [OUTDIR]}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${2:-$root/plans}
mkdir -p "$out"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
export COLUMNS=${COLUMNS:-160}
run="$here/runs/any-shape.toml"
platform="$here/platforms/16gib-12h.toml"
python3 -m afford plan "$cert" --platform "$platform" --run "$run" > "$out/plan-any-shape.txt"
for flag in "" --accept-noisy; do
  rc=0
  python3 -m afford preflight "$cert" --platform "$platform" --run "$run" $flag \
    > "$out/preflight-any-shape${flag:+-accepted}.txt" || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "preflight failed with exit code $rc" >&2
    exit "$rc"
  fi
  echo "preflight ${flag:-(no flag)}: exit $rc"
done
python3 -m afford predict "$cert" --batch 20 --seq 4096 --platform "$platform" \
  > "$out/predict-b20-s4096.txt"
echo "plan-any-shape.txt, preflight-any-shape*.txt, predict-b20-s4096.txt in $out"
