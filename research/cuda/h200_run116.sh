#!/bin/bash
# Thirty-second session: attn_rows_f32 (ATTN_ROWS > 0), the prefill attention that reads each
# KV split once for ATTN_ROWS_Q rows of ATTN_ROWS_HEADS heads (run 115: attn_paged_f32 took 45.0
# of a 1,024-token BF16 prefill's 131.3 ms of kernel time on an H100, 34%).
# Order: self-check with ATTN_ROWS = 2 (f32 and f16 cache; the attention row compares the rows
# entry to the walking one bit for bit), stop if red; TTFT of 1,024 tokens BF16 without and with
# the rows entry (4 x 4, 2 x 4, 8 x 2), Q4_K (QTC_Q4_K = 2) without and with; then the CUDA gate
# lanes tiny and qwen3 with ATTN_ROWS = 2 (every prefill of 2+ rows on the rows entry, decode on
# the walking one: Level A across the two kernels end to end).
# Prediction: attention 45 -> 8-15 ms, BF16 TTFT -30 to -37 ms (H100 131 -> 95-100 ms).
# Usage: h200_run116.sh MEMRA OUT_DIR (about 7 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { f=/tmp/c-$1.toml; shift; printf '[kernel_defines]\n' > $f; for kv in "$@"; do printf '%s = "%s"\n' "${kv%%=*}" "${kv#*=}" >> $f; done; }
mk check ATTN_ROWS=2
mk base
mk r44 ATTN_ROWS=64
mk r24 ATTN_ROWS=64 ATTN_ROWS_Q=2
mk r82 ATTN_ROWS=64 ATTN_ROWS_Q=8 ATTN_ROWS_HEADS=2
mk q4 QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2
mk q4r QTC_Q4_K=2 QTC_Q4_UNROLL=4 QTC_Q4_UNROLL_NT=2 ATTN_ROWS=64
ok=1
for kv in f32 f16; do
  step "self-check, $kv cache, ATTN_ROWS = 2"
  timeout 120 $N --config /tmp/c-check.toml --kv-cache-dtype $kv probe --self-check > "$O/sc-$kv.txt" 2>&1
  grep -E "self-check: |attn_paged|FAIL|rror" "$O/sc-$kv.txt" | tail -8 | cut -c1-200 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-$kv.txt" || ok=0
done
[ $ok = 1 ] || { step "self-check not green: stop"; exit 1; }
for c in base r44 r24 r82; do
  step "ttft bf16 1024, $c"
  timeout 70 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
    --reps 5 --out "$O/ttft.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for c in q4 q4r; do
  step "ttft q4_k 1024, $c"
  timeout 60 $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q4_k --prompt-len 1024 \
    --reps 5 --out "$O/ttft.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
for g in tiny qwen3; do
  step "CUDA lane $g, ATTN_ROWS = 2"
  timeout 90 $N --config /tmp/c-check.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g: $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
done
step done
