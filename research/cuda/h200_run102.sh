#!/bin/bash
# Prepared in the twenty-fifth session; its first call (this script) got no answer: the device
# machine stopped answering and none was lent for the rest of the session. Run it first next time.
# TCK_FUSE (the split-K reduce inside the wgmma split-K
# form: the warpgroup that completes a row group's count adds its slices, the same slice_sum in
# the same order, so the same bits). Run 74's profile put the reduces of qkv, gate+up and down at
# 6.8 + 9.5 + 6.0 us a layer (cold L2) and the lm-head's at 31.8 us a step.
# 1. Self-check (f16 cache) with the shipped defaults and with TCK_FUSE = 1, the CUDA lanes tiny /
#    qwen3 with TCK_FUSE = 1 (the checks of
#    the split-K reduces compare every token's row bit for bit with the one-token form; the
#    gated check requires the SwiGLU epilogue taken where the form is routed).
# 2. Kernel table at M = 16 / 32: q/o, qkv, gate+up, down, lm-head, fuse 0 / 1, and fuse 1 with
#    TCK_MIN_MB = 0 (q/o on the split-K form too: run 101's ncu has the one-token form for q/o at
#    M = 32 bound by L1 (74-78% of its throughput; L2 51%, DRAM 40%), which the split-K form's
#    x staging avoids; run 96: 17.9 us either way with the reduce kernel).
# 3. Decode BF16 bs=32 (f16 cache, shipped defaults) fuse 0 / 1 / 1 with TCK_MIN_MB = 0
#    (f1m0) interleaved, N = 3 each round; then bs=16 and bs=64 fuse 0 / 1.
# Prediction: reduces hidden, about 10 us a layer and 30 us a step of lm-head: bs=32 +4 to +7%
# (5,270 -> 5,480-5,640 tok/s).
# Usage: h200_run102.sh MEMRA OUT_DIR (about 7 minutes)
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nTCK_FUSE = "1"\n' > /tmp/c-f1.toml
printf '[kernel_defines]\nTCK_FUSE = "0"\n' > /tmp/c-f0.toml
printf '[kernel_defines]\nTCK_FUSE = "1"\nTCK_MIN_MB = "0"\n' > /tmp/c-f1m0.toml
ok=1
for f in f0 f1; do
  step "self-check, f16 cache, $f (f0: the shipped defaults, whose linear_tck_* now take 8 more arguments)"
  timeout 150 $B --config /tmp/c-$f.toml --kv-cache-dtype f16 probe --self-check > "$O/sc-$f.txt" 2>&1
  grep -E "self-check: |linear_gated|linear_qkv|FAIL|rror" "$O/sc-$f.txt" | tail -6 | cut -c1-220 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-$f.txt" || ok=0
done
for g in tiny qwen3; do
  timeout 90 $B --config /tmp/c-f1.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g (TCK_FUSE = 1): $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
  grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
done
[ $ok = 1 ] || { step "a gate or the self-check is not green: no timing"; grep -E "FAIL|fail" "$O"/gates-*.txt | head -20 | cut -c1-200 | tee -a "$L"; exit 1; }
step "kernel table, BF16, M = 16 / 32, TCK_FUSE 0 / 1"
timeout 150 $B probe --bench-kernels --kernel-tokens 16,32 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,gate+up,down,lm-head \
  --variants "TCK_FUSE=0;TCK_FUSE=1;TCK_FUSE=1,TCK_MIN_MB=0" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^(TCK_FUSE|TCK_MIN_MB)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for round in 1 2; do
  for f in f0 f1 f1m0; do
    step "decode bf16 bs=32, depth 128, f16 cache, $f, round $round"
    timeout 100 $B --backend cuda --config /tmp/c-$f.toml --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:bf16 \
      --batch 32 --depth 128 --new-tokens 128 --reps 3 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$f /" | cut -c1-160 | tee -a "$L"
  done
done
for bs in 16 64; do
  for f in f0 f1; do
    step "decode bf16 bs=$bs, depth 128, f16 cache, $f"
    timeout 100 $B --backend cuda --config /tmp/c-$f.toml --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:bf16 \
      --batch $bs --depth 128 --new-tokens 128 --reps 2 --out "$O/decode.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$f /" | cut -c1-160 | tee -a "$L"
  done
done
step done
