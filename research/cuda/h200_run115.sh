#!/bin/bash
# Thirty-first session (prepared, not yet run): where a 1,024-token prefill's GPU time goes
# (target 4: BF16 128 ms against 35; the wgmma GEMM measured 38% of the dense peak on gate+up,
# run 64, and the rest -- attention, norms, the split passes -- has not been measured). Nsight
# Compute durations by kernel name over one prefill (research/cuda/ncu_prefill.sh): BF16 with
# the H200 defaults, then Q4_K with QTC_Q4_K = 2 (run 114's wgmma forms) if ncu works here.
# Prediction: BF16 linears (linear_tcw_*) 75-85% of the kernels' sum, attention 5-10%, the split
# passes (tcw_split_x) 2-4%; the kernels' sum 5-15% below the wall-clock TTFT (launch gaps).
# Usage: h200_run115.sh MEMRA OUT_DIR (about 3 minutes; ncu on gVisor cannot read counters)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
DD=""
case "$gpu" in *H200*) ;; *) DD="--device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $DD" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
ncu --version 2>&1 | tail -1 | tee -a "$L"
step "ncu prefill BF16 1024"
mkdir -p "$O/bf16" "$O/q4k"
timeout 240 bash research/cuda/ncu_prefill.sh "$N" "$O/bf16" synth:llama-3.1-8b:bf16 1024 4000 $DD 2>&1 | tee -a "$L"
tail -3 "$O/bf16/ncu-prefill.err" | cut -c1-200 | tee -a "$L"
printf '[kernel_defines]\nQTC_Q4_K = "2"\nQTC_Q4_UNROLL = "4"\nQTC_Q4_UNROLL_NT = "2"\n' > /tmp/c-wg.toml
step "ncu prefill Q4_K (QTC_Q4_K = 2) 1024"
timeout 200 bash research/cuda/ncu_prefill.sh "$N" "$O/q4k" synth:llama-3.1-8b:q4_k 1024 4000 $DD --config /tmp/c-wg.toml 2>&1 | tee -a "$L"
tail -3 "$O/q4k/ncu-prefill.err" | cut -c1-200 | tee -a "$L"
step done
