#!/bin/bash
# Run 130 (short: what the session's last 275 s of device time allow): ATTN_TILE with the
# weights group-major (one float4 of a slot's weights for 4 positions of a group in the V loop:
# 5 shared-memory wavefronts a position a warp instead of 8) and attn_tile_f32 in its own module.
# Green (self-check f32, f16), then BF16 TTFT tile / ship / tile.
# Prediction (H100): tile 101.3 -> 99-100.5 ms (the V loop's share of the kernel down a third).
# Outcome: 101.4 / 101.4 against ship 102.6 (no change from run 129's 101.3): wrong; reverted.
# Usage: h200_run130.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-200}
source "$(dirname "$0")/run_lib.sh"
run_start any
mk ship
mk tile ATTN_TILE=1
for kv in f32 f16; do
  step "self-check, $kv cache, config tile"
  timeout 60 $N --config /tmp/c-tile.toml --kv-cache-dtype $kv probe --self-check > "$O/sc-$kv.txt" 2>&1
  grep -E "self-check: |FAIL|rror" "$O/sc-$kv.txt" | tail -3 | cut -c1-200 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-$kv.txt" || { step "not green: no timing"; exit 1; }
done
ttft bf16 tile ship tile
step done; exit 0
