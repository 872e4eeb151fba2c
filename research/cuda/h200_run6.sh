#!/bin/bash
# Device call: linear-kernel micro-benchmarks at the Llama-3.1-8B shapes (memra probe
# --bench-kernels) for several rows-per-warp settings, the self-check with rows-per-warp > 1
# (bit-identity across M must hold for every setting), and the per-step overhead on a tiny model.
# Usage: h200_run6.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
step "self-check LIN_ROWS_M1=4 LIN_ROWS=2"
cat > /tmp/rows.toml <<'T'
[kernel_defines]
LIN_ROWS_M1 = "4"
LIN_ROWS = "2"
T
$B --config /tmp/rows.toml probe --self-check > "$O/selfcheck-rows.txt" 2>&1; grep -E "linear_(bf16|q8_0|q4_k)|self-check" "$O/selfcheck-rows.txt" | tee -a "$L"
step "bench kernels"
$B probe --bench-kernels --variants "LIN_ROWS_M1=1;LIN_ROWS_M1=2;LIN_ROWS_M1=4;LIN_WARPS=8,LIN_ROWS_M1=2;LIN_ROWS=2" > "$O/kbench.txt" 2>&1; grep -v "^device\|^compute\|^SMs\|^memory\|^driver\|^nvrtc\|^cuda include\|^kernel cache" "$O/kbench.txt" | tee -a "$L"
step "decode tiny model (per-step overhead)"
$B --backend cuda bench decode --model synth:tiny-llama:bf16 --batch 1 --depth 128 --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
step done
