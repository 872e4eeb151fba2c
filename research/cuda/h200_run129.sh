#!/bin/bash
# Run 129 (binary of this session's code): ATTN_TILE with the V loop branch-free. Run 128c/d
# (H100) found attn_tile_f32 at IPC 1.45 and 1.15 ms a layer against the rows entry's 0.89; its
# SASS had a branch per slot between each weight's shared load and its 8 FMAs in the V loop
# (half the kernel's FMAs). When a thread's slots are heads of one row (GT % SPT == 0, every
# shipped shape) the loop now runs over that row's keys only, with no test inside: the same terms
# in the same order. The binary also merges the tuned file before the combination check, so the
# tile configs set ATTN_TILE alone (ATTN_ROWS = 64 from the file) and "ship" is the file as is
# (now with TCW_TMA).
# 1. Green: self-check f32 and f16 + lanes with 16 rows a block; self-check with 4 and 8.
# 2. BF16 TTFT of 1,024 tokens: ABBA tile / ship; tile4 and tile8 once.
# 3. Stall reasons of attn_tile_f32 (one launch); the prefill breakdown with tile.
# Prediction (H100): attn_tile_f32 1.15 -> 0.6-0.75 ms a layer; TTFT 102.7 -> 92-97 ms.
# Usage: h200_run129.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-420}
source "$(dirname "$0")/run_lib.sh"
run_start any
mk ship
mk tile ATTN_TILE=1
mk tile4 ATTN_TILE=1 ATTN_TILE_ROWS=4
mk tile8 ATTN_TILE=1 ATTN_TILE_ROWS=8
$N --config /tmp/c-tile.toml serve --print-config 2>/dev/null | grep -E "TCW|ATTN_ROWS|ATTN_TILE" | tee -a "$L"
green tile || { step "tile not green: no timing"; exit 1; }
for c in tile4 tile8; do
  step "self-check, f32 cache, config $c"
  timeout 100 $N --config /tmp/c-$c.toml probe --self-check > "$O/sc-$c.txt" 2>&1
  grep -E "self-check: |FAIL|rror" "$O/sc-$c.txt" | tail -3 | cut -c1-200 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-$c.txt" || { step "$c not green: no timing"; exit 1; }
done
ttft bf16 tile ship ship tile tile4 tile8
left $((B - 60)) "ncu stalls" || exit 0
step "ncu attn_tile_f32 stalls, one launch"
timeout 60 ncu --kernel-name attn_tile_f32 --launch-skip 8 --launch-count 1 --section SpeedOfLight --section Occupancy \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  $N --backend cuda --config /tmp/c-tile.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 --reps 1 --warmup 0 \
  --out /tmp/x.jsonl > "$O/ncu-tile.txt" 2>&1
grep -E "Duration|Executed Ipc A|Achieved Occ|stalled" "$O/ncu-tile.txt" | awk '!/stalled/ || $NF+0 >= 0.05' | cut -c1-120 | tee -a "$L"
left $((B - 45)) "ncu prefill" || exit 0
step "ncu prefill BF16 1024, tile"
mkdir -p "$O/ncu"
timeout 45 bash "$(dirname "$0")/ncu_prefill.sh" "$N" "$O/ncu" synth:llama-3.1-8b:bf16 1024 4000 --config /tmp/c-tile.toml 2>&1 | head -8 | tee -a "$L"
step done; exit 0
