#!/bin/bash
# Twenty-fourth session. (a) Q8_0 bs=1 (target 2: 267 tok/s, 54% of copy bandwidth, against 86%
# for BF16). SASS of linear_tc_q8_0_n1 at the H200 defines: per loop trip a warp loads
# QTC_Q8_UNROLL (2) units x QTC_WT (2) tiles x 16 bytes a lane, then runs their MMAs before the
# next loads (one group in flight; 4 trips for a 4,096-wide K over 16 slices). New: QTC_Q8_DB
# (the double buffering of QTC_DB for this entry alone). Prediction: q/o [4096, 4096] at M = 1
# 9.7 -> about 7 us; Q8_0 decode bs=1 267 -> about 290 tok/s if the small matrices move.
# (b) f32 decode attention at depth 8,192 on the wide entries (target 5 with the f32 cache at
# -11.1%): their K-loop and V-batch variants.
# Usage: h200_run99.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_Q8_DB = "1"\n' > /tmp/c-db.toml
printf '[kernel_defines]\nQTC_Q8_DB = "0"\n' > /tmp/c-nodb.toml
step "self-check, QTC_Q8_DB = 1"
timeout 150 $B --config /tmp/c-db.toml probe --self-check > "$O/sc-db.txt" 2>&1
grep -E "self-check: |q8_0|FAIL|rror" "$O/sc-db.txt" | tail -4 | cut -c1-200 | tee -a "$L"
grep -q "self-check: PASS" "$O/sc-db.txt" || { step "self-check not PASS: stop"; exit 1; }
step "kernel table Q8_0, M = 1"
timeout 120 $B probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0 --kernel-shapes q/o,qkv,gate+up,down \
  --variants ";QTC_Q8_DB=1;QTC_Q8_DB=1,QTC_Q8_UNROLL=1;QTC_Q8_DB=1,QTC_Q8_UNROLL=4;QTC_Q8_UNROLL=4;QTC_WT=1" > "$O/kb-q8.txt" 2>&1
grep -E "defines|^linear |rror" "$O/kb-q8.txt" | sed -E '/defines/{s/.*/& /;s/^kernels, defines \{.*$/echo "kernels, defines: $(echo "&" | grep -oE "(QTC_Q8_DB|QTC_Q8_UNROLL|QTC_WT)=[0-9]+" | tr "\\n" " ")"/e}' | cut -c1-110 | tee -a "$L"
step "attention table, f32 cache, one row, wide entries at 8,192"
timeout 120 $B probe --bench-kernels --kernel-ops attn --attn-rows 1 --attn-depths 8192 \
  --variants ";ATTN_KUNROLL=4;ATTN_KORDER=1;ATTN_VBATCH=4;ATTN_MINB=2" > "$O/kb-attn.txt" 2>&1
grep -E "defines|attn |rror" "$O/kb-attn.txt" | sed -E 's/kernels, defines \{.*/kernels, next variant/' | cut -c1-110 | tee -a "$L"
for c in db nodb; do
  step "decode q8_0 bs=1, depth 128, $c"
  timeout 150 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 \
    --depth 128 --new-tokens 128 --reps 3 --out "$O/q8.jsonl" 2>&1 | grep -E "^decode|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
done
step done
