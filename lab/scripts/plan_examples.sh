#!/usr/bin/env bash
# The two example plans of issue 6 from a certificate (the committed H200 one):
#   afford plan CERT --platform local                              -> plan-local.txt
#   afford plan CERT --platform examples/platforms/16gib-12h.toml   -> plan-16gib-12h.txt
# both with the run examples/runs/example.toml, plus their JSON and the preflight verdicts.
# Usage: lab/scripts/plan_examples.sh CERT [OUTDIR]   (OUTDIR defaults to lab/plans/)
set -euo pipefail
cert=${1:?usage: lab/scripts/plan_examples.sh CERT [OUTDIR]}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${2:-$root/plans}
mkdir -p "$out"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
export COLUMNS=${COLUMNS:-160}
run="$here/runs/example.toml"

for platform in local "$here/platforms/16gib-12h.toml"; do
  tag=$(basename "$platform" .toml)
  python3 -m afford plan "$cert" --platform "$platform" --run "$run" > "$out/plan-$tag.txt"
  python3 -m afford plan "$cert" --platform "$platform" --run "$run" --json > "$out/plan-$tag.json"
  # preflight exits 1 on NO-GO: that is an answer, not a failure of this script
  rc=0
  python3 -m afford preflight "$cert" --platform "$platform" --run "$run" \
    > "$out/preflight-$tag.txt" || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "preflight on $tag failed with exit code $rc" >&2
    exit "$rc"
  fi
  echo "$tag: plan-$tag.txt, plan-$tag.json, preflight-$tag.txt (preflight exit $rc)"
done
