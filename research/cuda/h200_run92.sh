#!/bin/bash
# Twenty-third session. Run 91 found the bs=64 decode step itself slow (2,714 tok/s against
# 4,902 at bs=32: 23.6 ms a step against 6.5), so serve c=64's 2,258 is the step, not the
# server. At 64 rows or more (QTC_GEMM_MIN = 64) the linear layers take the wgmma GEMM, blocks
# of 128 rows x 128 tokens: at M = 64 half of each tile is padding and a 4,096-row matrix gets
# 32 blocks for 132 SMs (run 63's table at M = 128: down 282 us, gate+up 181, qkv 95, against
# about 28 / 54 / 12 us of weight bytes). Raising QTC_GEMM_MIN keeps 33-255 rows on the
# split-K forms (two or more token groups of 32; the second group's weight reads can hit L2).
# Same bits either way: every form computes a row with the same chain (self-check M = 130).
# 1. Self-check with QTC_GEMM_MIN = 256 (M = 130 then runs on the split-K form: still equal to
#    M = 1 bit for bit).
# 2. Kernel table BF16 and Q8_0, M = 32 / 64 / 128, QTC_GEMM_MIN 64 against 256.
# 3. Decode BF16 bs 48 / 64 / 128, QTC_GEMM_MIN 64 against 256 (N = 3).
# 4. bs 64 / 128 with QTC_GEMM_MIN = 256 and CUDA graphs up to 128 rows; serve c = 64 the same.
# Prediction: bs=64 step about 2 x the bs=32 step's linear time less L2 hits: 9-11 ms, so
# 5,800-7,000 tok/s (was 2,714); serve c=64 above c=32's 3,227.
# Usage: h200_run92.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for g in 64 256; do printf '[kernel_defines]\nQTC_GEMM_MIN = "%s"\n' $g > /tmp/c-g$g.toml; done
step "self-check, QTC_GEMM_MIN = 256"
timeout 120 $B --config /tmp/c-g256.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check not PASS: stop"; exit 1; }
step "kernel table"
timeout 120 $B probe --bench-kernels --kernel-tokens 32,64,128 --kernel-dtypes bf16,q8_0 \
  --kernel-shapes q/o,qkv,gate+up,down --variants "QTC_GEMM_MIN=64;QTC_GEMM_MIN=256" > "$O/kbench.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kbench.txt" | sed 's/, LIN_ROWS.*//' | cut -c1-110 | tee -a "$L"
for g in 64 256; do
  step "decode bf16 bs 48/64/128, QTC_GEMM_MIN $g"
  timeout 150 $B --backend cuda --config /tmp/c-g$g.toml bench decode --model synth:llama-3.1-8b:bf16 \
    --batch 48,64,128 --depth 128 --new-tokens 128 --reps 3 --out "$O/gemm-min.jsonl" 2>&1 \
    | grep -E "^decode|rror" | sed "s/^/min$g /" | cut -c1-160 | tee -a "$L"
done
step "decode bf16 bs 64/128, QTC_GEMM_MIN 256, graphs up to 128 rows"
timeout 150 $B --backend cuda --config /tmp/c-g256.toml --cuda-graph-max-batch 128 bench decode \
  --model synth:llama-3.1-8b:bf16 --batch 64,128 --depth 128 --new-tokens 128 --reps 3 --out "$O/gemm-min.jsonl" 2>&1 \
  | grep -E "^decode|rror" | sed "s/^/min256-g128 /" | cut -c1-160 | tee -a "$L"
step "serve bf16 c = 64, QTC_GEMM_MIN 256, graphs up to 64 rows"
timeout 150 $B --backend cuda --config /tmp/c-g256.toml --cuda-graph-max-batch 64 bench serve \
  --model synth:llama-3.1-8b:bf16 --concurrency 64 --input-len 128 --new-tokens 128 --reps 3 --out "$O/gemm-min.jsonl" 2>&1 \
  | grep -E "^serve|rror" | sed "s/^/min256-g64 /" | cut -c1-200 | tee -a "$L"
step done
