#!/bin/bash
# The floor's band against every recorded run with fresh-process floor truths (13 runs,
# 9 families, H100 and H200; bloom's certificate has no step-time model): run from the
# repository's root, each certificate refitted by this afford.
#   bash lab/scripts/band_coverage_runs.sh [--stored] [--rows] [--work]
# BENCH=path: another report over the same runs (lab/scripts/band_fresh_component.py)
set -eu
F=lab/device-runs/2026-12-06-h100-families
F2=lab/device-runs/2026-12-06-h100-families-2
T=lab/device-runs/2026-12-06-h100-truths
W=lab/device-runs/2026-12-06-h100-workspaces
R=../shared/recorded/h200-2026-12-06
H=lab/device-runs/2026-12-04-h200-truth
HD=lab/device-runs/2026-12-06-h100-head
args=()
for n in gpt_bigcode_d1024L16H16F4096V50272 qwen2_d1024L16H16F4096V50272 \
    stablelm_d1024L16H16F4096V50272; do
  args+=("$F:$F/cert-hf_$n.json.gz:$F/truth-hf_$n.jsonl.gz")
done
for n in olmo2_d1024L16H16F4096V50272 starcoder2_d1024L16H16F4096V50272; do
  args+=("$F2:$F2/cert-hf_$n.json.gz:$F2/truth-hf_$n.jsonl.gz")
done
args+=("$T:$T/cert-neox.json:$T/truth-hf_gpt_neox.jsonl.gz"
       "$W:$W/cert-gemma.json.gz:$W/gemma-truth.jsonl"
       "$W:$W/cert-lora.json.gz:$W/lora-truth.jsonl"
       "$R:$R/cert-gemma.json:$R/truth.json" "$R:$R/cert-opt.json:$R/truth.json"
       "$H/run1:$H/run1/cert-hf_qwen2_d896L24H14K2F4864V32000.json:$H/run1/truth-hf_qwen2_d896L24H14K2F4864V32000.jsonl"
       "$H/run2:$H/run2/cert-hf_llama_d1024L16H16K8F2816V32000_lora_r16.json:$H/run2/truth-hf_llama_d1024L16H16K8F2816V32000_lora_r16.jsonl"
       "$HD:$HD/cert-hf-1.json.gz:$HD/truth-floor.jsonl.gz")
exec python3 "${BENCH:-benches/band_coverage.py}" "$@" "${args[@]}"
