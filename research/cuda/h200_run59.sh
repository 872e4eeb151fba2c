#!/bin/bash
# Sixteenth session. The second tiled tensor-core form (QTC_GEMM = 2, kernels/linear_tcg.cu):
# x split once into bf16 parts by tcg_split_x, then 16 warps of 32 x 32 a block of 128 x 128,
# 122-125 registers, slice totals in shared memory, x and weights by cp.async (TCG2_STAGES
# stages of TCG2_KU units). Same chain, so the self-check and the CUDA lane must stay green.
# Two numbers, BF16 gate+up at M = 1,024: 240 GFLOP, 481 GFLOP of MMA with 2 parts; 235 MB of
# weights read 8 times (once a token block) from L2. Run 57: 2.13 ms (226 TFLOP/s of MMA, the
# tensor pipe 34.5%). Prediction: 1.2-1.5 ms (tensor pipe 50-60%), TTFT of 1,024 tokens BF16
# 179 -> 125-145 ms, Q8_0 192 -> 135-155.
# Usage: h200_run59.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk g1; mk g2 QTC_GEMM=2; mk g2s3 QTC_GEMM=2 TCG2_STAGES=3; mk g2k2 QTC_GEMM=2 TCG2_KU=2 TCG2_STAGES=3
mk g2s6 QTC_GEMM=2 TCG2_STAGES=6
step "self-check with QTC_GEMM = 2"
timeout 90 $B --config /tmp/c-g2.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
if ! grep -q "self-check: PASS" "$O/selfcheck.txt"; then grep -E "tcg|tiled|130" "$O/selfcheck.txt" | head -20 | tee -a "$L"; fi
for g in tiny qwen3; do
  timeout 60 $B --config /tmp/c-g2.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, QTC_GEMM = 2: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
done
for n in g1 g2 g2s3 g2k2 g2s6; do
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 128,1024 \
    --kernel-shapes qkv,gate+up,down > "$O/k-$n.txt" 2>&1
  echo "$n: $(awk '$1=="linear" {printf "%s %s@%s %s  ", $2, $5, $6, $7}' "$O/k-$n.txt")$(grep -E "rror" "$O/k-$n.txt" | head -2)" | tee -a "$L"
done
for c in g1 g2 g1 g2; do
  step "BF16 TTFT 1,024, $c"
  timeout 60 $B --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 3 \
    --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
done
for c in g1 g2; do
  step "Q8_0 TTFT 1,024, $c"
  timeout 60 $B --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q8_0 --prompt-len 1024 --reps 3 \
    --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
done
step done
