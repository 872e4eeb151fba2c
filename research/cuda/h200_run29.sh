#!/bin/bash
# Eighth session, second device call.
# 0. Self-check with the new defaults (QIMMA_BPF=1, QIMMA_TILES=2 for Q8_0 blocks of more than
#    8 tokens only) and with the GQA-grouped attention (ATTN_HEADS = 4, 3; f32 and f16 KV).
# 1. Attention kernel table (new `probe --kernel-ops attn`): rows 1, 8; depths 2048, 8192;
#    ATTN_HEADS 1, 2, 4 with the f32 and the f16 cache.
# 2. CUDA lane (qwen3, tiny) with ATTN_HEADS=4.
# 3. Decode Q8_0 bs=1,8,32 and Q4_K bs=1,8,32 at depth 128 with the new defaults; bs=1 Q8_0 at
#    depth 128, 8192 with ATTN_HEADS=4, f32 then f16 KV.
# Usage: h200_run29.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
sc() { # name, args...
  local n=$1; shift
  step "self-check $n"; "$B" "$@" probe --self-check > "$O/selfcheck-$n.txt" 2>&1
  grep -E "linear_(q8_0|q4_k)|attn|self-check|FAIL|rror" "$O/selfcheck-$n.txt" | tail -4 | tee -a "$L"
}
printf '[kernel_defines]\nATTN_HEADS = "4"\n' > /tmp/h4.toml
printf '[kernel_defines]\nATTN_HEADS = "3"\n' > /tmp/h3.toml
sc defaults
sc h4 --config /tmp/h4.toml
sc h3 --config /tmp/h3.toml
sc h4-kvf16 --config /tmp/h4.toml --kv-cache-dtype f16
step "attention kernels"
for kv in f32 f16; do
  timeout 150 $B --kv-cache-dtype $kv probe --bench-kernels --kernel-ops attn --attn-rows 1,8 --attn-depths 2048,8192 \
    --variants "ATTN_HEADS=1;ATTN_HEADS=2;ATTN_HEADS=4" > "$O/kbench-attn-$kv.txt" 2>&1
  grep -E "defines|attn " "$O/kbench-attn-$kv.txt" | tee -a "$L"
done
step "gates ATTN_HEADS=4"
$B --config /tmp/h4.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B --config /tmp/h4.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
for d in q8_0 q4_k; do
  step "decode bs=1,8,32 $d defaults"
  timeout 120 $B --backend cuda bench decode --model synth:llama-3.1-8b:$d --batch 1,8,32 --depth 128 \
    --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -3 | tee -a "$L"
done
for kv in f32 f16; do
  step "decode bs=1 depth 128,8192 q8_0 ATTN_HEADS=4 kv $kv"
  timeout 150 $B --backend cuda --config /tmp/h4.toml --kv-cache-dtype $kv bench decode --model synth:llama-3.1-8b:q8_0 \
    --batch 1 --depth 128,8192 --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
done
step done
