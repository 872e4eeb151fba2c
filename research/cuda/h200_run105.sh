#!/bin/bash
# Twenty-seventh session. Target 2 by instruction count (run 103b: the Q8_0 one-token entries are
# issue-bound, 53-63% issue active). New in `linear_tc_q8_0_n1*` at M = 1 with QTC_Q8_M1 = 1:
#  - the int8 -> bf16 conversion in bf16x2 arithmetic: A = 0x43:(b & 0x7f), C = 0xC3:(b & 0x80),
#    A + C = b exactly; 4 instructions a pair (2 masks a word, 4 byte permutes, 2 HFMA2.BF16)
#    against 5.5 through f32 (PRMT, FADD, PRMT, FADD, F2FP);
#  - x split once per warp and group (one element a lane, into the warp's part of shared memory,
#    then 2 LDS.128 a unit by lane group g = 0) instead of each lane splitting 4 pairs of which
#    only g = 0 holds the token;
#  - the scale FMAs skip the dead token column.
# SASS (NVRTC 13.0, sm_90a): the loop of `_n1` went 370 -> 288 instructions a group of 2 units
# x 2 tiles (-22%), `_n1_big` 191 -> 148 (-23%); M > 1 loops unchanged (371, 191).
# Same bits by construction (exact conversion, same split); the self-check's M-independence rows
# (M = 1 against 3, 8, 9, 33), the tiny lane's batched-vs-solo/tiny-qwen2-q8 and the 8B Q8_0
# backend parity check it.
# Prediction: Q8_0 q/o at M = 1 10.9 -> ~9 us, gate+up 42.6 -> ~36 us; Q8_0 bs=1 decode
# 271 -> 295-310 tok/s.
# Then run 104's bs=32 A/B (old = ef4a33a, new = this binary with its shipped defaults).
# Usage: h200_run105.sh EF4A33A_MEMRA NEW_MEMRA OUT_DIR (about 8 minutes)
set -u
E=$1; N=$2; O=$3; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_Q8_M1 = "1"\n' > /tmp/c-m1.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "0"\n' > /tmp/c-m0.toml
ok=1
step "self-check, QTC_Q8_M1 = 1"
timeout 150 $N --config /tmp/c-m1.toml probe --self-check > "$O/sc-m1.txt" 2>&1
grep -E "self-check: |linear_q8_0|FAIL|rror" "$O/sc-m1.txt" | tail -6 | cut -c1-220 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-m1.txt" || ok=0
for g in tiny llama-3.1-8b-q8; do
  step "CUDA lane $g, QTC_Q8_M1 = 1"
  timeout 150 $N --config /tmp/c-m1.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g: $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
  grep -E "q8" "$O/gates-$g.txt" | grep -E "GREEN|RED|ERROR" | head -4 | cut -c1-160 | tee -a "$L"
  grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
done
[ $ok = 1 ] || { step "a gate or the self-check is not green: no timing"; grep -E "FAIL|fail|RED|ERROR" "$O"/gates-*.txt "$O/sc-m1.txt" | head -20 | cut -c1-200 | tee -a "$L"; exit 1; }
step "kernel table, Q8_0, M = 1, QTC_Q8_M1 0 / 1 / 1 with 4 units a group (2 for the big matrices)"
timeout 150 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0 --kernel-shapes q/o,qkv,gate+up,down,lm-head \
  --variants "QTC_Q8_M1=0;QTC_Q8_M1=1;QTC_Q8_M1=1,QTC_Q8_UNROLL=4,QTC_Q8_UNROLL_BIG=2" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QTC_Q8_(M1|UNROLL|UNROLL_BIG)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for round in 1 2; do
  for m in m0 m1; do
    step "decode q8_0 bs=1, depth 128, $m, round $round"
    timeout 100 $N --backend cuda --config /tmp/c-$m.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 \
      --depth 128 --new-tokens 128 --reps 3 --out "$O/decode-q8-$m.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$m /" | cut -c1-160 | tee -a "$L"
  done
done
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then B=$E; else B=$N; fi
    step "decode bf16 bs=32, depth 128, f16 cache, $side, round $round"
    timeout 110 $B --backend cuda --kv-cache-dtype f16 bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
      --depth 128 --new-tokens 128 --reps 3 --out "$O/decode-bs32-$side.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$side /" | cut -c1-160 | tee -a "$L"
  done
done
step done
