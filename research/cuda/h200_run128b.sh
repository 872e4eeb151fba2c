#!/bin/bash
# Run 128b, right after run 128 (an H100): run 128's tile configs were refused because the config
# check runs before the tuned file adds ATTN_ROWS = 64 (ATTN_TILE needs ATTN_ROWS > 0). Here the
# tile configs name ATTN_ROWS = 64 themselves. Green (f32/f16, lanes, 4 rows a block), then BF16
# TTFT ABBA tile / tma, then the ncu prefill breakdown on tile.
# Prediction (H100 now): tma 102.7 ms -> 91-96 ms with ATTN_TILE (attention 23.3 ms -> ~12).
# Usage: h200_run128b.sh MEMRA OUT_DIR [SECONDS]
set -u
N=$1; O=$2; B=${3:-400}
source "$(dirname "$0")/run_lib.sh"
run_start any
mk tma TCW_BULK=1 TCW_WS=1 TCW_TMA=1 TCW_WS_Q=0
mk tile TCW_BULK=1 TCW_WS=1 TCW_TMA=1 TCW_WS_Q=0 ATTN_ROWS=64 ATTN_TILE=1
mk tile4 TCW_BULK=1 TCW_WS=1 TCW_TMA=1 TCW_WS_Q=0 ATTN_ROWS=64 ATTN_TILE=1 ATTN_TILE_ROWS=4
green tile || { step "tile not green: no timing"; exit 1; }
step "self-check, f32 cache, config tile4"
timeout 100 $N --config /tmp/c-tile4.toml probe --self-check > "$O/sc-tile4.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-tile4.txt" | tail -3 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-tile4.txt" || { step "tile4 not green: no timing"; exit 1; }
ttft bf16 tile tma tma tile
left $((B - 100)) "ncu prefill" || exit 0
step "ncu prefill BF16 1024, tile"
mkdir -p "$O/ncu"
timeout 95 bash "$(dirname "$0")/ncu_prefill.sh" "$N" "$O/ncu" synth:llama-3.1-8b:bf16 1024 4000 --config /tmp/c-tile.toml 2>&1 | tee -a "$L"
step done; exit 0
