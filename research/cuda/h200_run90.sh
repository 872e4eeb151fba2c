#!/bin/bash
# Prepared in the twenty-second session (not run): ATTN_WIDE_ROWS (steps of at least that many
# query rows run decode attention on the `_wide` entries, ATTN_HEADS_WIDE = 4 heads a block;
# same bits). Run 89 (attention alone, f32 cache, 8B heads, ATTN_SPLIT 256): 2 -> 4 heads a
# block, 32 rows: depth 128 26.0 -> 20.2 us, 256 47.7 -> 36.7, 2,048 219 -> 171; 16 rows:
# 128 14.7 -> 17.3 (worse), 256 25.3 -> 20.8; 8 rows 128 11.3 -> 13.3 (worse); 1 row worse.
# 1. Self-check with ATTN_WIDE_ROWS = 2 (the wide entries are compiled only when it is above 0):
#    the attention rows compare the wide entries (walking and into a workspace) bit for bit with
#    the narrow ones ("batch-identical" yes), with groups of 1, 2, 4, 5 and 8 query heads.
# 2. CUDA lanes tiny and qwen3 with ATTN_WIDE_ROWS = 2: one-row steps narrow, batches wide, so
#    batched-vs-solo compares the two kernels' bits.
# 3. Attention table, rows 1 / 8 / 16 / 32, depths 128 / 256 / 2,048, ATTN_WIDE_ROWS 0 / 1.
# 4. BF16 bs=32 decode, ATTN_WIDE_ROWS 0 / 32 / 0 / 32 (N = 5), and bs=16 0 / 16.
# Prediction: bs=32 decode averages depths 128-256: attention about 37 -> 28.5 us a layer,
# -0.27 ms of a 6.5 ms step: +4% (4,900 -> about 5,100 tok/s); bs=16 +2%.
# If it holds: ATTN_WIDE_ROWS = 32 (or 16) in boards/defaults/nvidia-h200.toml.
# Usage: h200_run90.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
for w in 0 2 16 32; do printf '[kernel_defines]\nATTN_WIDE_ROWS = "%s"\n' $w > /tmp/c-w$w.toml; done
step "self-check"
timeout 120 $B --config /tmp/c-w2.toml probe --self-check > "$O/selfcheck.txt" 2>&1
grep -E "self-check: |attn_paged|FAIL|rror" "$O/selfcheck.txt" | tail -4 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/selfcheck.txt" || { step "self-check not PASS: stop"; exit 1; }
ok=1
for g in tiny qwen3; do
  timeout 90 $B --config /tmp/c-w2.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
  echo "CUDA lane $g, ATTN_WIDE_ROWS = 2: $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
  grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
done
[ $ok = 1 ] || { step "a gate is not green: no timing"; exit 1; }
step "attention table"
timeout 90 $B probe --bench-kernels --kernel-ops attn --attn-rows 1,8,16,32 --attn-depths 128,256,2048 \
  --variants "ATTN_WIDE_ROWS=0;ATTN_WIDE_ROWS=1" > "$O/kbench-attn.txt" 2>&1
grep -E "defines|attn |rror" "$O/kbench-attn.txt" | sed 's/, LIN_ROWS.*//' | cut -c1-100 | tee -a "$L"
step "BF16 bs=32, ATTN_WIDE_ROWS 0 / 32 / 0 / 32 (N = 5)"
for c in w0 w32 w0 w32; do
  timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/wide.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step "BF16 bs=16, ATTN_WIDE_ROWS 0 / 16 (N = 5)"
for c in w0 w16; do
  timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 16 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/wide.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
