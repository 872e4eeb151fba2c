#!/bin/bash
# Prepared in the twentieth session (not run): the first device run of TCS_GLU = 1 (commit
# 8591493: a split-K gate|up projection's reduce computes SwiGLU itself, linear_tcs_reduce_swiglu)
# and the same-call A/B that run 78 could not finish.
# 1. Self-check with TCS_GLU = 1: the new row "linear_gated_bf16 (split-K reduce + SwiGLU)" must
#    say "reduce took SwiGLU: [true, true, true] (required)" and PASS (unfused and fused rows
#    bit-equal to the one-token rows).
# 2. CUDA lane tiny + qwen3 with TCS_GLU = 1 and TCK_MIN_MB = 0 (batched-vs-solo, graphs,
#    speculative... green).
# 3. BF16 bs=32, TCS_GLU 0 / 1 / 0 / 1, N = 5 each.
# Prediction (run 76's ncu: gate+up reduce 6.8 us + swiglu 4.7 us a layer; fused about 6 us):
# -5.5 us a layer, -0.18 ms a step: 4,850 -> about 4,980 tok/s (+2.7%).
# Usage: h200_run79.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nTCS_GLU = "1"\n' > /tmp/c-glu1.toml
# The lane's models are small (hidden 256): TCK_MIN_MB = 0 routes their matrices through the
# wgmma split-K form too, so the gates run the new reduces (the H200 default, 40, keeps them off
# it: run 76's lane never ran linear_tcs_reduce4).
printf '[kernel_defines]\nTCS_GLU = "1"\nTCK_MIN_MB = "0"\n' > /tmp/c-lane.toml
printf '[kernel_defines]\nTCS_GLU = "0"\n' > /tmp/c-glu0.toml
step "self-check, TCS_GLU = 1"
timeout 90 $B --config /tmp/c-glu1.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "tuned defaults|portable|self-check: |linear_gated|FAIL|rror" "$O/selfcheck.txt" | tail -5 | cut -c1-220 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check not PASS: stop"; exit 1; }
ok=1
for g in tiny qwen3; do
  timeout 90 $B --config /tmp/c-lane.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, TCS_GLU = 1, TCK_MIN_MB = 0: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
  grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
done
[ $ok = 1 ] || { step "a gate is not green: no timing"; exit 1; }
step "BF16 bs=32, TCS_GLU 0 / 1 / 0 / 1 (N = 5 each)"
for c in glu0 glu1 glu0 glu1; do
  timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/glu.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-200 | tee -a "$L"
done
step done
