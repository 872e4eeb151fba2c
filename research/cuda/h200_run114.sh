#!/bin/bash
# Thirtieth session: Q4_K on the tensor-core family (QTC_Q4_K = 1, kernels/linear_tc.cu's
# one-token entries `linear_tc_q4_k_n{1,2,4}`; with QTC_Q4_K = 1 no split-K or GEMM form takes Q4_K, so the
# one-token entries take every M). The 16 codes a lane as nibbles (8 bytes), bf16 by one LOP3 and
# one HFMA2 a register; d sc and dmin m the lanes kernels' exact f32 products; the unit's Σx by
# the same MMAs with an A of ones. Bits differ from the exact-integer lanes (QLIN_INT), so Level
# A is held within the setting (the self-check's across-M rows) and Level B by the tolerance.
# Order: self-check (stop if red), kernel table at M = 1 and 32 (lanes / TC at unroll 1 and 4;
# 2 spills 16 bytes in `_n1` at NVRTC 13.0),
# Q4_K decode bs=1 and bs=32, TTFT of 1,024 tokens, each lanes against TC.
# Prediction: M = 1 within +-15% of the lanes kernel (instruction-bound like Q8_0's, half the
# bytes); M = 32 3-5x faster (the integer kernel's lane order costs it there, 812 tok/s at bs=32);
# TTFT 1,048 ms -> 300-500 ms (the `_n2` entries re-read the weights every 16 tokens).
# Thirty-first session, the same call: QTC_Q4_K = 2 (arm "wg") also puts Q4_K on the wgmma
# split-K form (linear_tck_q4_k_n16/_n32, 9-255 tokens: Σx of each unit by an A of ones once a
# block, d words from global memory before the batch's wait) and the wgmma GEMM (linear_tcw_q4_k
# from QTC_GEMM_MIN tokens, Σx from a `tcw_xsum` pass a slab): the same chain, so the same bits
# as the one-token entries (the self-check's across-M rows). Predictions: M = 32 1.5-3x faster
# than the one-token entries (the split-K form reads each weight once for 32 tokens where `_n2`
# reads it twice, and stages x once a slice); TTFT 1,024 tokens 150-250 ms (the GEMM's MMA work is
# BF16's; the codes' conversion and the Σx fold cost the rest; BF16 128 ms).
# Usage: h200_run114.sh MEMRA OUT_DIR (about 5 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/c-lanes.toml
printf '[kernel_defines]\nQTC_Q4_K = "1"\nQTC_Q4_UNROLL = "4"\nQTC_Q4_UNROLL_NT = "2"\n' > /tmp/c-tc.toml
printf '[kernel_defines]\nQTC_Q4_K = "2"\nQTC_Q4_UNROLL = "4"\nQTC_Q4_UNROLL_NT = "2"\n' > /tmp/c-wg.toml
step "self-check, QTC_Q4_K = 1"
timeout 120 $N --config /tmp/c-tc.toml probe --self-check > "$O/sc-tc.txt" 2>&1
grep -E "self-check: |linear_q4_k|FAIL|rror" "$O/sc-tc.txt" | tail -6 | cut -c1-220 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-tc.txt" || { step "self-check not green: stop"; exit 1; }
step "self-check, QTC_Q4_K = 2"
timeout 120 $N --config /tmp/c-wg.toml probe --self-check > "$O/sc-wg.txt" 2>&1
grep -E "self-check: |linear_q4_k|FAIL|rror" "$O/sc-wg.txt" | tail -6 | cut -c1-220 | tee -a "$L"
WG=wg; grep -q "self-check: PASS" "$O/sc-wg.txt" || { WG=; step "QTC_Q4_K = 2 not green: its arms are left out"; }
step "kernel table, Q4_K, M = 1 and 32"
V="QLIN_INT=1;QTC_Q4_K=1,QTC_Q4_UNROLL=1,QTC_Q4_UNROLL_NT=1;QTC_Q4_K=1,QTC_Q4_UNROLL=4,QTC_Q4_UNROLL_NT=2"
[ -n "$WG" ] && V="$V;QTC_Q4_K=2,QTC_Q4_UNROLL=4,QTC_Q4_UNROLL_NT=2"
timeout 130 $N probe --bench-kernels --kernel-tokens 1,32,1024 --kernel-dtypes q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "$V" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | awk '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ /^QTC_Q4/) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"
for c in lanes tc; do
  step "decode q4_k bs=1, $c"
  timeout 60 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/decode1-$c.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for c in lanes tc $WG; do
  step "decode q4_k bs=32, $c"
  timeout 70 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 32 \
    --depth 128 --new-tokens 64 --reps 3 --out "$O/decode32-$c.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for c in $WG tc lanes; do
  step "ttft q4_k 1024, $c"
  timeout 60 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q4_k --prompt-len 1024 \
    --reps 3 --out "$O/ttft-$c.jsonl" 2>&1 | grep -E "^(ttft|decode)|rror|tok/s| ms" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
