#!/bin/bash
# Prepared in the eleventh session for the twelfth (not yet run; compile-tested only).
# PDL_EARLY = 1: with PDL = 1, the one-token Q8_0 / Q4_K entries issue their L2 prefetch of the
# first row group's weights (QLIN_M1_PREFETCH units a lane) before griddepcontrol.wait, so those
# weights stream in while the kernel before drains. Run 43: PDL alone cost Q8_0 1.1% (278.0 ->
# 275.0) while BF16 gained 3.8%. Prediction: Q8_0 bs=1 275 -> 282-290, Q4_K 336 -> 340-350.
# Checks first (self-check, CUDA lane), then A/B decode bs=1, interleaved twice.
# Usage: h200_run47.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nPDL_EARLY = "1"\n' > /tmp/early.toml
step "self-check, PDL_EARLY = 1"
timeout 60 $B --config /tmp/early.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -3 | cut -c1-200 | tee -a "$L"
for g in qwen3 tiny; do
  step "CUDA lane, PDL_EARLY = 1: $g"
  timeout 40 $B --config /tmp/early.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  grep -E "gates run|FAIL|RED|rror" "$O/gates-$g.txt" | head -5 | cut -c1-250 | tee -a "$L"
done
for q in q8_0 q4_k; do
  for c in early none early none; do
    cc=""; [ $c = early ] && cc="--config /tmp/early.toml"
    step "$q bs=1, $c"
    timeout 90 $B --backend cuda $cc bench decode --model synth:llama-3.1-8b:$q --batch 1 --depth 128 \
      --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
done
step done
