#!/bin/bash
# Twelfth session, the last call (about 300 s of device time left). The split-K tensor-core form
# for 9..32 tokens (QTC_SK = 1, kernels/linear_tc.cu linear_tcs_*): a block stages its K slice of
# x once, split, in shared memory, and its warps walk runs of row tiles against it; slice sums
# reduced in order by linear_tcs_reduce. Two numbers for gate+up [28672, 4096] at M = 32: weights
# 235 MB as before; x from L2 132 blocks x 128 KiB = 17 MB (was about 460 MB); slice sums 14.7 MB
# written and read. Prediction: gate+up at M = 32 101 -> 65-75 us, a layer 201 -> 140-150 us,
# BF16 bs=32 3,900 -> 4,800-5,200 tok/s. Checks first (self-check covers M = 9 and 32, CUDA lane),
# then the kernel table at M = 32 for a few launch shapes, then bs=32 decode A/B.
# Usage: h200_run51.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
mk base; mk sk QTC_SK=1; mk sk16 QTC_SK=1 QTC_SK_WARPS=16; mk skv2 QTC_SK=1 QTC_SK_WAVES=2; mk skdb0 QTC_SK=1 QTC_SK_DB=0
step "self-check, QTC_SK = 1"
timeout 60 $B --config /tmp/c-sk.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "stop: self-check"; exit 0; }
step "CUDA lane, QTC_SK = 1: qwen3"
timeout 40 $B --config /tmp/c-sk.toml gate --lane cuda --only qwen3 > "$O/gates-qwen3.txt" 2>&1
grep -E "gates run|RED|rror" "$O/gates-qwen3.txt" | head -4 | cut -c1-250 | tee -a "$L"
best=base; bestv=999999
for n in base sk sk16 skv2 skdb0; do
  timeout 30 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 32 > "$O/k-$n.txt" 2>&1
  v=$(awk '$1=="linear" && $6==32 && ($5=="q/o"||$5=="qkv"||$5=="gate+up"||$5=="down") {s+=$7; n++} END {if (n==4) print s; else print 999999}' "$O/k-$n.txt")
  echo "$n: M=32 layer $v us; $(awk '$1=="linear" && $6==32 {printf "%s %s  ", $5, $7}' "$O/k-$n.txt")" | tee -a "$L"
  if awk "BEGIN{exit !($v < $bestv)}"; then best=$n; bestv=$v; fi
done
step "best $best"
if [ "$best" != base ]; then
  for c in $best base; do
    step "BF16 bs=32, $c"
    timeout 75 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 \
      --depth 128 --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
fi
step done
