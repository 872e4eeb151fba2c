#!/bin/bash
# Prepared in the twenty-first session (not run): the first device run of TCS_ROPE = 1 (a
# split-K Q|K|V projection's reduce rotates q and k and appends k and v to the KV cache itself,
# kernels/attention.cu linear_tcs_reduce_rope_append; models with no q/k norm only).
# 1. Self-check with TCS_ROPE = 1 (the row does not depend on it: it runs both): the new row
#    "linear_qkv_rope_bf16 (split-K reduce + RoPE + KV append)" must say "reduce took RoPE:
#    [true x 12] (required)" and PASS (q, k, v and the cache slots bit-equal to the one-token rows,
#    unfused and fused, both RoPE styles, with and without a bias).
# 2. CUDA lane tiny (llama-shaped, no q/k norm: the fused path) with TCS_ROPE = 1 and
#    TCK_MIN_MB = 0 (the small models' matrices on the split-K forms); qwen3 (q/k norms: the
#    unfused path) as a control.
# 3. BF16 bs=32, TCS_ROPE 0 / 1 / 0 / 1, N = 5 each, 128 new tokens.
# Prediction: the qkv reduce (run 76: 5.8 us) and rope_qk_append (about 4 us) become one kernel
# of about 6-7 us: -3 us a layer, -0.1 ms a step, +1.4% at bs=32 (TCS_GLU's prediction was 2.7%
# and it gave 0.9%: expect +0.5-1.5%).
# Usage: h200_run85.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nTCS_ROPE = "1"\n' > /tmp/c-rope1.toml
printf '[kernel_defines]\nTCS_ROPE = "1"\nTCK_MIN_MB = "0"\n' > /tmp/c-lane.toml
printf '[kernel_defines]\nTCS_ROPE = "0"\n' > /tmp/c-rope0.toml
step "self-check, TCS_ROPE = 1"
timeout 120 $B --config /tmp/c-rope1.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "tuned defaults|self-check: |linear_qkv_rope|linear_gated|FAIL|rror" "$O/selfcheck.txt" | tail -5 | cut -c1-240 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check not PASS: stop"; exit 1; }
ok=1
for g in tiny qwen3; do
  timeout 90 $B --config /tmp/c-lane.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, TCS_ROPE = 1, TCK_MIN_MB = 0: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
  grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
done
[ $ok = 1 ] || { step "a gate is not green: no timing"; exit 1; }
step "BF16 bs=32, TCS_ROPE 0 / 1 / 0 / 1 (N = 5 each)"
for c in rope0 rope1 rope0 rope1; do
  timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/rope.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-200 | tee -a "$L"
done
step done
