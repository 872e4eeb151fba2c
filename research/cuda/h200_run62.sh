#!/bin/bash
# Seventeenth session. The wgmma tiled form (QTC_GEMM = 3, kernels/linear_tcw.cu): TCW_WG
# warpgroups of 64 rows x 128 tokens a block, A (the weights' fragments) from registers, B (x in
# bf16 parts, core-matrix order, written once by tcw_split_x) by descriptor, m64n64k16, 162-168
# registers, no serialization reported by ptxas. Run 61 found wgmma bit-identical to mma.sync
# m16n8k16, so the self-check (M = 130 rows against M = 1) and the CUDA lane must stay green.
# Two numbers, BF16 gate+up [28672, 4096] at M = 1,024 with 2 parts: 481 GFLOP of MMA (0.64 ms
# at 749 TFLOP/s); 235 MB of weights read 8 times from L2. Shipped (mma.sync tiled): 2.13 ms.
# Prediction: gate+up 1.0-1.4 ms with 2 warpgroups (the fold of each unit sum is 64 FADDs a
# thread beside 8 wgmma; the block's barrier each unit keeps the warpgroups in step, so the
# tensor pipe idles during folds), TTFT of 1,024 tokens BF16 179 -> 100-130 ms.
# Usage: h200_run62.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk g1; mk w2 QTC_GEMM=3; mk w3 QTC_GEMM=3 TCW_WG=3; mk w2s3 QTC_GEMM=3 TCW_STAGES=3; mk w1 QTC_GEMM=3 TCW_WG=1
step "self-check with QTC_GEMM = 3"
timeout 120 $B --config /tmp/c-w2.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
if ! grep -q "self-check: PASS" "$O/selfcheck.txt"; then grep -E "false|130" "$O/selfcheck.txt" | head -20 | cut -c1-220 | tee -a "$L"; fi
timeout 60 $B --config /tmp/c-w3.toml probe --self-check > "$O/selfcheck-w3.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-w3.txt" | tail -2 | cut -c1-200 | sed 's/^/WG=3: /' | tee -a "$L"
for g in tiny qwen3; do
  timeout 60 $B --config /tmp/c-w2.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, QTC_GEMM = 3: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
done
for n in g1 w2 w3 w2s3 w1; do
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16,q8_0 --kernel-tokens 128,1024 \
    --kernel-shapes qkv,gate+up,down > "$O/k-$n.txt" 2>&1
  echo "$n: $(awk '$1=="linear" {printf "%s %s@%s %s  ", $2, $5, $6, $7}' "$O/k-$n.txt")$(grep -E "rror" "$O/k-$n.txt" | head -2)" | tee -a "$L"
done
step "BF16 TTFT 1,024 (the first call makes the checkpoint)"
timeout 150 $B --backend cuda --config /tmp/c-g1.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 3 \
  --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
for c in w2 w3 g1 w2 w3; do
  step "BF16 TTFT 1,024, $c"
  timeout 60 $B --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 3 \
    --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
done
step done
