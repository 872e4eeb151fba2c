#!/bin/bash
# Run 135 (thirty-ninth session): the wgmma descriptors by one add (kernels/linear_tcw.cu `issue`,
# commit after bd19585). Two binaries: A (bd19585's code, every descriptor by tcw_desc's address
# arithmetic, about 5 dependent instructions before each HGMMA's R2UR) and B (one LEA a
# descriptor). Same descriptors, same MMAs: same bits.
# Run 134 (H100): the BF16 GEMM's loop runs about 1,300 cycles a unit a warpgroup for 256 cycles
# of its MMAs; stalls wait 1.45 and no instruction 1.4-1.7 a issued instruction.
# B also has TCW_APF (the next unit's A fragments read before this unit's MMAs go in, into a
# second set of registers).
# 1. Green (B): self-check f32 and f16, CUDA lanes, with TCW_PP, TCW_APF and ATTN_TILE = 1; then
#    the shipped file alone (self-check f32).
# 2. Kernel table at M = 1,024, BF16, A and B: ship, TCW_PP, TCW_PP + TCW_APF (A: the first two).
# 3. BF16 TTFT of 1,024 tokens: A-ship B-ship B-both B-all B-all B-both B-ship A-ship (both: PP
#    and ATTN_TILE; all: both and APF).
# Prediction: B 3-8% faster GEMM; APF a further 3-6%; TTFT (both) 99.3 -> 94-97 ms on an H100,
# all 90-94.
# Usage: h200_run135.sh MEMRA_A MEMRA_B OUT_DIR [SECONDS]
set -u
NA=$1; NB=$2; O=$3; B=${4:-400}
N=$NB
source "$(dirname "$0")/run_lib.sh"
run_start any
case "$N" in *device-defaults*) NA="$NA --device-defaults boards/defaults/nvidia-h200.toml";; esac
NB=$N
mk ship
mk both TCW_PP=1 ATTN_TILE=1
mk all TCW_PP=1 ATTN_TILE=1 TCW_APF=1
if [ -z "${SKIP_GREEN:-}" ]; then  # SKIP_GREEN=1: a second call on a machine where this passed
green all || { step "B with all not green: no timing"; exit 1; }
step "self-check B, shipped file"
timeout 120 $N --config /tmp/c-ship.toml probe --self-check > "$O/sc-ship.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/sc-ship.txt" | tail -2 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-ship.txt" || { step "B ship not green"; exit 1; }
fi
for b in A B; do
  [ $b = A ] && M=$NA || M=$NB
  [ $b = A ] && V=";TCW_PP=1" || V=";TCW_PP=1;TCW_PP=1,TCW_APF=1"
  step "kernel table $b, M = 1,024, BF16"
  timeout 60 $M probe --bench-kernels --kernel-tokens 1024 --kernel-dtypes bf16 --kernel-shapes q/o,qkv,gate+up,down \
    --variants "$V" > "$O/kbench-$b.txt" 2>&1
  grep -E "^linear |rror" "$O/kbench-$b.txt" | cut -c1-100 | sed "s/^/$b /" | tee -a "$L"
done
for bc in A:ship B:ship B:both B:all B:all B:both B:ship A:ship; do
  b=${bc%%:*}; c=${bc#*:}; [ $b = A ] && M=$NA || M=$NB
  left $((B - 40)) "ttft $b $c" || break
  step "ttft bf16 1024, $b $c"
  timeout 60 $M --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
    --reps 5 --out "$O/ttft-bf16.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$b-$c /" | cut -c1-160 | tee -a "$L"
done
step done; exit 0
