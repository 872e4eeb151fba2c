#!/bin/bash
# Thirteenth session, first call. Two questions.
# (a) Q8_0 on the tensor-core family (QTC_Q8_0 = 1). It was left on the lane / integer kernels
#     by run 21 (gate+up M = 1 54.0 us against 37.5), before QTC_SPLIT = 16, QTC_SPLIT_BIG = 4,
#     QTC_DB_BIG, QTC_XSPLIT = 2 and PDL, which took the BF16 one-token form from 64.6 to 56.4 us
#     on gate+up (98% of copy bandwidth). Two numbers, Q8_0 gate+up [28672, 4096]: 125 MB of
#     quants + 7.3 MB of scales, 1 GFLOP (x 2 parts) at M = 32. A Q8_0 unit is 16 bytes a lane
#     (BF16: 32), so QTC_UNROLL = 2 gives it BF16's bytes in flight. Prediction: the TC form at
#     M = 1 near the lane kernels on gate+up (35-40 us) and ahead on down / q/o / qkv (44-46% of
#     bandwidth on the lanes); at M = 32 well ahead of the integer kernels (Q8_0 bs=32 1,713
#     tok/s against BF16 TC 3,900); Q8_0 bs=1 275 -> 290-320 tok/s if the layer sum drops 15%.
# (b) QTC_SK with its own unroll (QTC_SK_UNROLL = 4 at 8 warps; run 51 ran it at the H200's
#     QTC_UNROLL = 1, one 1 KiB unit in flight a warp); 2 and 8 beside it (16 warps leave room
#     for 1 unit only, which run 51's QTC_SK_WARPS = 16 already measured): prediction gate+up
#     M = 32 192 -> 80-100 us.
# Checks first (self-check and the tiny CUDA lane with QTC_Q8_0 = 1), then kernel tables, then
# decode A/B where a kernel table says it may pay.
# Usage: h200_run52.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
cp target/parts/smol.00 /tmp/smol.00 2>/dev/null && echo "stashed smol.00 for run 53" | tee -a "$L"
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
layer() { awk -v m=$2 '$1=="linear" && $6==m && ($5=="q/o"||$5=="qkv"||$5=="gate+up"||$5=="down") {s+=$7; n++} END {if (n==4) print s; else print 999999}' "$1"; }
mk base; mk tc QTC_Q8_0=1; mk tcu2 QTC_Q8_0=1 QTC_UNROLL=2; mk tcdb QTC_Q8_0=1 QTC_DB=1; mk tcs8 QTC_Q8_0=1 QTC_SPLIT=8
mk sk QTC_SK=1; mk sku2 QTC_SK=1 QTC_SK_UNROLL=2; mk sku8 QTC_SK=1 QTC_SK_UNROLL=8
step "self-check, QTC_Q8_0 = 1"
timeout 60 $B --config /tmp/c-tc.toml probe --self-check > "$O/selfcheck-tc.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-tc.txt" | tail -4 | cut -c1-200 | tee -a "$L"
tcok=0; grep -q "self-check: PASS" "$O/selfcheck-tc.txt" && tcok=1
if [ $tcok = 1 ]; then
  step "CUDA lane, QTC_Q8_0 = 1: tiny"
  timeout 40 $B --config /tmp/c-tc.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny-tc.txt" 2>&1
  grep -E "gates run|RED|rror" "$O/gates-tiny-tc.txt" | head -4 | cut -c1-250 | tee -a "$L"
  grep -q "0 failed" "$O/gates-tiny-tc.txt" || tcok=0
fi
best=base; bestv=999999
for n in base tc tcu2 tcdb tcs8; do
  [ $n != base ] && [ $tcok = 0 ] && break
  timeout 40 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes q8_0 --kernel-tokens 1,32 > "$O/k-q8-$n.txt" 2>&1
  v1=$(layer "$O/k-q8-$n.txt" 1); v32=$(layer "$O/k-q8-$n.txt" 32)
  echo "q8 $n: layer M=1 $v1 us, M=32 $v32 us; $(awk '$1=="linear" && ($6==1||$6==32) {printf "%s@%s %s  ", $5, $6, $7}' "$O/k-q8-$n.txt")" | tee -a "$L"
  if awk "BEGIN{exit !($v1 < $bestv)}"; then best=$n; bestv=$v1; fi
done
step "q8 best at M = 1: $best"
for n in sk sku2 sku8; do
  timeout 30 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 32 > "$O/k-bf-$n.txt" 2>&1
  echo "bf16 $n: M=32 layer $(layer "$O/k-bf-$n.txt" 32) us; $(awk '$1=="linear" && $6==32 {printf "%s %s  ", $5, $7}' "$O/k-bf-$n.txt")" | tee -a "$L"
done
# Decode A/B, Q8_0: the M = 1 winner (if not base) against base at bs=1, interleaved; bs=32 for
# the best TC variant either way (the integer kernels' M = 32 is the known gap).
tcb=$best; [ $tcb = base ] && tcb=tc
if [ $tcok = 1 ]; then
  for c in $tcb base $tcb base; do
    step "Q8_0 bs=1, $c"
    timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128 \
      --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
  for c in $tcb base; do
    step "Q8_0 bs=32, $c"
    timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 32 --depth 128 \
      --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
  for c in $tcb base; do
    step "Q8_0 TTFT 1,024, $c"
    timeout 60 $B --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:q8_0 \
      --prompt-len 1024 --reps 3 --out "$O/bench.jsonl" 2>&1 | grep -E "^ttft|rror" | tee -a "$L"
  done
fi
step done
