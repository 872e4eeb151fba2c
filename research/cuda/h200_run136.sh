#!/bin/bash
# Run 136 (thirty-ninth session): after run 135b. Q8_0 TTFT of 1,024 tokens with binaries A and
# B (the descriptor change touches the Q8_0 entries' issue too; they keep the cp.async ring),
# then BF16 on B: ATTN_TILE alone against the shipped file.
# Usage: h200_run136.sh MEMRA_A MEMRA_B OUT_DIR [SECONDS]
set -u
NA=$1; NB=$2; O=$3; B=${4:-300}
N=$NB
source "$(dirname "$0")/run_lib.sh"
run_start any
case "$N" in *device-defaults*) NA="$NA --device-defaults boards/defaults/nvidia-h200.toml";; esac
NB=$N
mk ship
mk tile ATTN_TILE=1
for bc in A:ship:q8_0 B:ship:q8_0 B:tile:bf16 B:ship:bf16; do
  IFS=: read b c d <<< "$bc"; [ $b = A ] && M=$NA || M=$NB
  left $((B - 40)) "ttft $b $c $d" || break
  step "ttft $d 1024, $b $c"
  timeout 70 $M --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:$d --prompt-len 1024 \
    --reps 5 --out "$O/ttft-$d.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$b-$c /" | cut -c1-160 | tee -a "$L"
done
step done; exit 0
