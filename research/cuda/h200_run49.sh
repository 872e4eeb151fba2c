#!/bin/bash
# Twelfth session. Target 3 of #7 (bs=32 decode, 0.66x gpt-fast in run 45b). Run 46: at M = 32
# the one-token-family tensor-core kernel (linear_tc_bf16_n4*) reads the weights at 55% of copy
# bandwidth (gate+up 100.5 us against 65.7 at M = 1): 122 registers, 25% theoretical occupancy,
# no eligible warp 64% of cycles: latency-bound. This sweeps the knobs that change no bits
# (QTC_WT, QTC_UNROLL, QTC_DB; QTC_GEMM_MIN = 32 sends M = 32 to the tiled form) on the 8B
# shapes at M = 1 and 32, then times bs = 32 decode with the best M = 32 layer sum against the
# defaults, interleaved, after the CUDA lane on that candidate.
# Prediction: DB = 1 helps M = 32 (weights in flight during the MMAs) by 10-20%; the tiled form
# at M = 32 wastes 3/4 of its MMAs but pipelines; expect it near the defaults.
# Usage: h200_run49.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
cands=("base:" "wt1:QTC_WT=1" "wt4:QTC_WT=4" "un2:QTC_UNROLL=2" "un8:QTC_UNROLL=8" "db1:QTC_DB=1"
  "db1un2:QTC_DB=1 QTC_UNROLL=2" "db1wt1:QTC_DB=1 QTC_WT=1" "gemm32:QTC_GEMM_MIN=32")
best=base; bestv=999999
for c in "${cands[@]}"; do
  n=${c%%:*}; d=${c#*:}
  { echo "[kernel_defines]"; for kv in $d; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml
  step "kernels, $n ($d)"
  timeout 60 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 1,32 \
    > "$O/k-$n.txt" 2>&1
  grep -E "^linear" "$O/k-$n.txt" | grep -E "q/o|qkv|gate\+up|down" | tee -a "$L"
  v=$(awk '$1=="linear" && $6==32 && ($5=="q/o"||$5=="qkv"||$5=="gate+up"||$5=="down") {s+=$7; n++} END {if (n==4) print s; else print 999999}' "$O/k-$n.txt")
  v1=$(awk '$1=="linear" && $6==1 && ($5=="q/o"||$5=="qkv"||$5=="gate+up"||$5=="down") {s+=$7; n++} END {if (n==4) print s; else print 999999}' "$O/k-$n.txt")
  echo "layer sum $n: M=1 $v1 us, M=32 $v us" | tee -a "$L"
  if awk "BEGIN{exit !($v < $bestv)}"; then best=$n; bestv=$v; fi
done
step "best at M = 32: $best ($bestv us a layer)"
if [ "$best" != base ]; then
  for g in qwen3 tiny; do
    timeout 40 $B --config /tmp/c-$best.toml gate --lane cuda --only $g > "$O/gates-$g.txt" 2>&1
    grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200 | tee -a "$L"
  done
  for c in $best base $best base; do
    step "BF16 bs=32, $c"
    timeout 100 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
      --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
fi
step done
