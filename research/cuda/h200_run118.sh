#!/bin/bash
# Thirty-second session, last device minutes (about 3 minutes of command time).
# On an H200: QTC_Q4_K = 2 against the integer lanes by the request-time metric QTC_Q8_0 shipped
# by (run 54): TTFT of 1,024 tokens + 255 decode steps at the bs=1 rate, 8B Q4_K. Run 114 (H100):
# lanes 1,030.7 + 255 / 324.7 tok/s = 1,816 ms; QTC_Q4_K = 2 140.0 + 255 / 218.2 = 1,309 ms.
# On any other card: run 117's Nsight Compute of attn_rows_f32 and its ATTN_KORDER = 1 TTFT.
# Usage: h200_run118.sh MEMRA OUT_DIR
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { f=/tmp/c-$1.toml; shift; printf '[kernel_defines]\n' > $f; for kv in "$@"; do printf '%s = "%s"\n' "${kv%%=*}" "${kv#*=}" >> $f; done; }
mk lanes
mk wg QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2
mk r44 ATTN_ROWS=64
mk r44k ATTN_ROWS=64 ATTN_KORDER=1 ATTN_KUNROLL=4
case "$gpu" in
*H200*)
  for c in wg lanes; do
    step "ttft q4_k 1024, $c"
    timeout 45 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q4_k --prompt-len 1024 \
      --reps 3 --out "$O/ttft.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
    step "decode q4_k bs=1, $c"
    timeout 40 $N --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q4_k --batch 1 \
      --depth 128 --new-tokens 128 --reps 5 --out "$O/decode1.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
  done
  for g in tiny qwen3; do
    timeout 60 $N --config /tmp/c-wg.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
    echo "CUDA lane $g, QTC_Q4_K = 2: $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
  done;;
*)
  N="$N --device-defaults boards/defaults/nvidia-h200.toml"
  step "ncu attn_rows (4 x 4)"
  timeout 100 ncu --clock-control none -k regex:attn_rows --launch-count 1 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    $N --backend cuda --config /tmp/c-r44.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
    --out /tmp/x.jsonl > "$O/ncu-r44.txt" 2> "$O/ncu-r44.err"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache|L2 Cache Throughput|Achieved Occupancy|Issue Slots Busy|No Eligible|Eligible Warps|Stall|Executed Ipc A|Pipe" \
    "$O/ncu-r44.txt" | cut -c1-110 | tee -a "$L"
  step "ttft bf16 1024, r44k"
  timeout 50 $N --backend cuda --config /tmp/c-r44k.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
    --reps 5 --out "$O/ttft.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/r44k /" | cut -c1-160 | tee -a "$L";;
esac
step done
