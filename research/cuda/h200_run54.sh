#!/bin/bash
# Fourteenth session, third call. Run 52 found Q8_0 on the tensor-core family (QTC_Q8_0 = 1)
# 2.2x faster at bs=32 (4,070 against 1,837 tok/s) and 2.4x at the 1,024-token TTFT (192 against
# 467 ms), but 9% slower at bs=1 (250 against 274 tok/s; layer sum 98.4 against 89.7 us at
# M = 1). Its QTC_UNROLL = 2 variant took the 4096-row matrices at M = 1 to or below the lane
# kernels (q/o 9.7, qkv 13.2, down 25.8 us) while the big gate+up got slower (52.5 against 42.9):
# the Q8_0 entries now have their own load groups (QTC_Q8_UNROLL for `_n1`, QTC_Q8_UNROLL_NT for
# `_n2`/`_n4`, QTC_Q8_UNROLL_BIG and QTC_Q8_DB_BIG for `_n1_big`). Two numbers per Q8_0 unit: 16
# bytes a lane, 4 MMAs (2 k-halves x 2 parts of x) and 8 int8 pair conversions.
# Prediction: per-entry choices give a layer sum at M = 1 of 89-92 us (q/o 9.7 + qkv 13.2 + down
# 25.8 + gate+up 40-42), so Q8_0 bs=1 within 2% of the lane kernels (270-276 tok/s) with bs=32
# still about 4,000: then QTC_Q8_0 = 1 ships on the H200 (self-check and CUDA lane first).
# Also QTC_SK = 2 (the split-K form for the big matrices only; run 52: BF16 gate+up at M = 32 93
# against 102 us, the others slower): prediction BF16 bs=32 +3-4% (layer 201 -> 192 us).
# Usage: h200_run54.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local n=$1; shift; { echo "[kernel_defines]"; for kv in "$@"; do echo "${kv%%=*} = \"${kv#*=}\""; done; } > /tmp/c-$n.toml; }
get() { awk -v r="$2" -v m=$3 '$1=="linear" && $5==r && $6==m {print $7; exit}' "$1"; }
small1() { awk '$1=="linear" && $6==1 && ($5=="q/o"||$5=="qkv"||$5=="down") {s+=$7} END {print s+0}' "$1"; }
small32() { awk '$1=="linear" && $6==32 && ($5=="q/o"||$5=="qkv"||$5=="down") {s+=$7} END {print s+0}' "$1"; }
lt() { awk "BEGIN{exit !($1 < $2)}"; }
mk base
mk tc QTC_Q8_0=1
mk u2 QTC_Q8_0=1 QTC_Q8_UNROLL=2 QTC_Q8_UNROLL_NT=2
mk u4 QTC_Q8_0=1 QTC_Q8_UNROLL=4 QTC_Q8_UNROLL_NT=2
mk u8 QTC_Q8_0=1 QTC_Q8_UNROLL=8
mk b2n QTC_Q8_0=1 QTC_Q8_UNROLL_BIG=2 QTC_Q8_DB_BIG=0
mk b2 QTC_Q8_0=1 QTC_Q8_UNROLL_BIG=2
mk b4n QTC_Q8_0=1 QTC_Q8_UNROLL_BIG=4 QTC_Q8_DB_BIG=0
for n in tc u2 u4 u8 b2n b2 b4n; do
  timeout 40 $B --config /tmp/c-$n.toml probe --bench-kernels --kernel-dtypes q8_0 --kernel-tokens 1,32 > "$O/k-q8-$n.txt" 2>&1
  echo "q8 $n: small@1 $(small1 "$O/k-q8-$n.txt") small@32 $(small32 "$O/k-q8-$n.txt") gate+up@1 $(get "$O/k-q8-$n.txt" gate+up 1) gate+up@32 $(get "$O/k-q8-$n.txt" gate+up 32); $(awk '$1=="linear" && ($6==1||$6==32) {printf "%s@%s %s  ", $5, $6, $7}' "$O/k-q8-$n.txt")" | tee -a "$L"
done
# Compose: the best `_n1` (small matrices at M = 1), `_n2/_n4` (small at M = 32), `_n1_big`.
b1=tc; v=$(small1 "$O/k-q8-tc.txt")
for n in u2 u4 u8; do x=$(small1 "$O/k-q8-$n.txt"); lt $x $v && { b1=$n; v=$x; }; done
bn=tc; v=$(small32 "$O/k-q8-tc.txt"); x=$(small32 "$O/k-q8-u2.txt"); lt $x $v && bn=u2
bb=tc; v=$(get "$O/k-q8-tc.txt" gate+up 1)
for n in b2n b2 b4n; do x=$(get "$O/k-q8-$n.txt" gate+up 1); lt $x $v && { bb=$n; v=$x; }; done
U1=1; case $b1 in u2) U1=2;; u4) U1=4;; u8) U1=8;; esac
UN=1; [ $bn = u2 ] && UN=2
UB=1; DBB=1; case $bb in b2n) UB=2; DBB=0;; b2) UB=2;; b4n) UB=4; DBB=0;; esac
mk best QTC_Q8_0=1 QTC_Q8_UNROLL=$U1 QTC_Q8_UNROLL_NT=$UN QTC_Q8_UNROLL_BIG=$UB QTC_Q8_DB_BIG=$DBB
step "best: $(tr '\n' ' ' < /tmp/c-best.toml)"
timeout 40 $B --config /tmp/c-best.toml probe --bench-kernels --kernel-dtypes q8_0 --kernel-tokens 1,32 > "$O/k-q8-best.txt" 2>&1
echo "q8 best: small@1 $(small1 "$O/k-q8-best.txt") gate+up@1 $(get "$O/k-q8-best.txt" gate+up 1) small@32 $(small32 "$O/k-q8-best.txt") gate+up@32 $(get "$O/k-q8-best.txt" gate+up 32)" | tee -a "$L"
step "self-check, best"
timeout 60 $B --config /tmp/c-best.toml probe --self-check > "$O/selfcheck-best.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-best.txt" | tail -4 | cut -c1-200 | tee -a "$L"
ok=0; grep -q "self-check: PASS" "$O/selfcheck-best.txt" && ok=1
if [ $ok = 1 ]; then
  for g in tiny qwen3; do
    timeout 60 $B --config /tmp/c-best.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
    echo "CUDA lane $g: $(grep -E "gates run|RED|rror" "$O/gates-$g.txt" | head -3 | cut -c1-200)" | tee -a "$L"
    grep -q " 0 failed" "$O/gates-$g.txt" || ok=0
  done
fi
if [ $ok = 1 ]; then
  for c in best base best base; do
    step "Q8_0 bs=1, $c"
    timeout 80 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 --depth 128 \
      --new-tokens 256 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
  done
  step "Q8_0 bs=32, best"
  timeout 80 $B --backend cuda --config /tmp/c-best.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 32 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
fi
# QTC_SK = 2 for BF16 at M = 32, then bs=32 decode against the defaults.
mk sk2 QTC_SK=2
timeout 30 $B --config /tmp/c-sk2.toml probe --bench-kernels --kernel-dtypes bf16 --kernel-tokens 32 > "$O/k-bf-sk2.txt" 2>&1
echo "bf16 sk2 @32: $(awk '$1=="linear" && $6==32 {printf "%s %s  ", $5, $7}' "$O/k-bf-sk2.txt")" | tee -a "$L"
step "self-check, QTC_SK = 2"
timeout 60 $B --config /tmp/c-sk2.toml probe --self-check > "$O/selfcheck-sk2.txt" 2>&1
grep -E "self-check: |FAIL|rror" "$O/selfcheck-sk2.txt" | tail -3 | cut -c1-200 | tee -a "$L"
for c in sk2 base; do
  step "BF16 bs=32, $c"
  timeout 90 $B --backend cuda --config /tmp/c-$c.toml bench decode --model synth:llama-3.1-8b:bf16 --batch 32 --depth 128 \
    --new-tokens 128 --reps 5 --out "$O/bench.jsonl" 2>&1 | grep -E "^decode|rror" | tee -a "$L"
done
step done
