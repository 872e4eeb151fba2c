#!/bin/bash
# Twenty-eighth session (prepared on the CPU; no device was lent that session). Two checks and one
# A/B, in one call:
#  1. The split-K form moved to kernels/linear_tcs.cu (d5303c9) and the first tiled form to
#     kernels/linear_tct.cu (bef8291), SASS unchanged, have not run on a GPU since: the first
#     self-check sets QTC_SK = 1 (9-32 tokens through the split-K form); the last step, which
#     gates nothing, runs one with QTC_GEMM = 1 (258 tokens and up through the tiled form; the
#     H200 defaults use the wgmma form, QTC_GEMM = 3).
#  2. QTC_Q8_M1 = 2 (99d48e6): Q8_0 one-token launches take `linear_tc_q8_0_m1*`, the M = 1 loop
#     of QTC_Q8_M1 = 1 with its addressing and bounds tests out of the groups (one pointer a
#     stream moved by a constant, the other row tile at a block-uniform offset, no predicates in
#     a full group, every lane group reading the staged x). SASS (NVRTC 13.0, sm_90a): the loop
#     of a group of 2 units x 2 tiles 286 -> 215 instructions, `_big` 149 -> 127; 61 and 60
#     registers, no spills. Same operations in the same order: same bits. The self-check's
#     M-independence rows (M = 1 against 3, 8, 9, 33, ...) and the tiny lane's batched-vs-solo
#     q8 gate check it.
#  3. Q4_K's one-token lanes kernel (QLIN_INT = 1): QLIN_M1_LEAN = 1 (addressing out of the
#     loop, the sub-block index as lane & 7) and QLIN_FX = 1 (the unit's Σx term formed once at
#     staging): SASS 100 -> 76 instructions a unit with both (62 registers); LEAN alone 83 (64);
#     FX alone 89 (56). Their bits are checked here (self-check rows M = 1 against the
#     other token counts, the tiny lane's Q4_K gates); run 108b times them.
# Prediction: kernel table at M = 1 (µs) q/o 9.1 -> ~8.3, qkv 11.8 -> ~10.8, gate+up 33.6 ->
# ~32, down 23.2 -> ~21, lm-head 144 -> ~140; Q8_0 bs=1 decode 310 -> 320-330 tok/s. Q4_K:
# Q4_K (run 108b): FX + LEAN 5-10% on the kernels at M = 1, 2-5% on bs=1 decode.
# Usage: h200_run108.sh MEMRA OUT_DIR (about 8 minutes)
# The H200's tuned defaults (boards/defaults/nvidia-h200.toml) apply only on an H200: check the
# device line first (an H100 would time other defines).
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
# On another card (the device tool may lend an H100), the H200's tuned defaults are named so that
# the A/B runs the same defines; timings then are that card's, not the H200 board's.
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_Q8_M1 = "1"\n' > /tmp/c-m1.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "2"\n' > /tmp/c-m2.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "2"\nQTC_SK = "1"\nQLIN_INT = "1"\nQLIN_M1_LEAN = "1"\nQLIN_FX = "1"\n' > /tmp/c-sk1.toml
printf '[kernel_defines]\nQTC_GEMM = "1"\n' > /tmp/c-g1.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "2"\nQLIN_INT = "1"\nQLIN_M1_LEAN = "1"\nQLIN_FX = "1"\n' > /tmp/c-all.toml
ok=1
step "self-check, QTC_SK = 1, QTC_Q8_M1 = 2, QLIN_M1_LEAN = 1, QLIN_FX = 1"
timeout 150 $N --config /tmp/c-sk1.toml probe --self-check > "$O/sc-sk1-m2.txt" 2>&1
grep -E "self-check: |linear_q8_0|FAIL|rror" "$O/sc-sk1-m2.txt" | tail -6 | cut -c1-220 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-sk1-m2.txt" || ok=0
step "self-check, QTC_Q8_M1 = 2 (the H200 defaults otherwise)"
timeout 150 $N --config /tmp/c-m2.toml probe --self-check > "$O/sc-m2.txt" 2>&1
grep -E "self-check: |linear_q8_0|FAIL|rror" "$O/sc-m2.txt" | tail -6 | cut -c1-220 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-m2.txt" || ok=0
step "CUDA lane tiny, QTC_Q8_M1 = 2, QLIN_M1_LEAN = 1, QLIN_FX = 1"
timeout 150 $N --config /tmp/c-all.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1
echo "CUDA lane tiny: $(grep -E "gates run" "$O/gates-tiny.txt" | head -1)" | tee -a "$L"
grep -E "q8|q4" "$O/gates-tiny.txt" | grep -E "GREEN|RED|ERROR" | head -6 | cut -c1-160 | tee -a "$L"
grep -q " 0 failed" "$O/gates-tiny.txt" || ok=0
[ $ok = 1 ] || { step "a gate or a self-check is not green: no timing"; grep -E "FAIL|fail|RED|ERROR" "$O"/gates-*.txt "$O"/sc-*.txt | head -20 | cut -c1-200 | tee -a "$L"; exit 1; }
step "kernel table, Q8_0, M = 1: QTC_Q8_M1 1 / 2 / 2 with 2 units a big group / 2 with 4 units a group / 2 double-buffered"
timeout 170 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0 --kernel-shapes q/o,qkv,gate+up,down,lm-head \
  --variants "QTC_Q8_M1=1;QTC_Q8_M1=2;QTC_Q8_M1=2,QTC_Q8_UNROLL_BIG=2;QTC_Q8_M1=2,QTC_Q8_UNROLL=4;QTC_Q8_M1=2,QTC_Q8_DB=1" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QTC_Q8_(M1|UNROLL|UNROLL_BIG|DB)=/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for round in 1 2; do
  for m in m1 m2; do
    step "decode q8_0 bs=1, depth 128, $m, round $round"
    timeout 100 $N --backend cuda --config /tmp/c-$m.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 \
      --depth 128 --new-tokens 128 --reps 5 --out "$O/decode-q8-$m.jsonl" 2>&1 | grep -E "^decode|rror" \
      | sed "s/^/$m /" | cut -c1-160 | tee -a "$L"
  done
done
step "self-check, QTC_GEMM = 1 (the tiled form's move; gates nothing above)"
timeout 120 $N --config /tmp/c-g1.toml probe --self-check > "$O/sc-g1.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-g1.txt" | tail -4 | cut -c1-220 | tee -a "$L"
step done
