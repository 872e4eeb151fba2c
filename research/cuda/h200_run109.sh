#!/bin/bash
# Twenty-ninth session, first of two calls (run 108's plan with QLIN_MMA1 added; 108 never ran:
# no device started). Checks, then the Q8_0 and Q4_K kernel tables at M = 1, then the Q8_0 A/B.
#  1. Bits: one self-check with every new switch on (QTC_Q8_M1 = 2, QTC_SK = 1, QLIN_INT = 1,
#     QLIN_M1_LEAN = 1, QLIN_FX = 1, QLIN_MMA1 = 1); if it fails, one without QLIN_MMA1 says which.
#     The self-check's M-independence rows (M = 1 against 3, 8, 9, 33, ...) compare each one-token
#     entry with the other forms; the tiny lane's q8/q4 gates compare batched with solo.
#  2. QTC_Q8_M1 = 2 (twenty-eighth session): Q8_0 one-token loop without address arithmetic, SASS
#     286 -> 215 instructions a group. Prediction: q/o 9.1 -> ~8.3 µs, qkv 11.8 -> ~10.8, gate+up
#     33.6 -> ~32, down 23.2 -> ~21; Q8_0 bs=1 decode 310 -> 320-330 tok/s.
#  3. Q4_K at M = 1: QLIN_FX + QLIN_M1_LEAN (lanes loop 100 -> 76 instructions a unit) and
#     QLIN_MMA1 (kernels/linear_mma1.cu: 16 rows x 4 units in 4 integer MMAs, about 114 warp
#     instructions per 64 row-units against 76 per 32). Prediction: FX + LEAN 5-10% on the kernels,
#     MMA1 20-30% beyond that where it is issue-bound (gate+up, down), less on q/o (x staging).
# Usage: h200_run109.sh MEMRA OUT_DIR (about 6 minutes)
set -u
N=$1; O=$2; L=$O/log.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
# On another card (the device tool may lend an H100), the H200's tuned defaults are named so that
# the A/B runs the same defines; timings then are that card's, not the H200 board's.
case "$gpu" in *H200*) ;; *) N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";; esac
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC_Q8_M1 = "1"\n' > /tmp/c-m1.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "2"\n' > /tmp/c-m2.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "2"\nQTC_SK = "1"\nQLIN_INT = "1"\nQLIN_M1_LEAN = "1"\nQLIN_FX = "1"\nQLIN_MMA1 = "1"\n' > /tmp/c-all.toml
printf '[kernel_defines]\nQTC_Q8_M1 = "2"\nQTC_SK = "1"\nQLIN_INT = "1"\nQLIN_M1_LEAN = "1"\nQLIN_FX = "1"\n' > /tmp/c-nomma.toml
ok=1
step "self-check, every new switch: QTC_Q8_M1 = 2, QTC_SK = 1, QLIN_INT, QLIN_M1_LEAN, QLIN_FX, QLIN_MMA1"
timeout 150 $N --config /tmp/c-all.toml probe --self-check > "$O/sc-all.txt" 2>&1
grep -E "self-check: |linear_q4_k|linear_q8_0|FAIL|rror" "$O/sc-all.txt" | tail -8 | cut -c1-220 | tee -a "$L"
if ! grep -q "self-check: PASS" "$O/sc-all.txt"; then
  ok=0
  step "self-check without QLIN_MMA1"
  timeout 150 $N --config /tmp/c-nomma.toml probe --self-check > "$O/sc-nomma.txt" 2>&1
  grep -E "self-check: |linear_q4_k|FAIL|rror" "$O/sc-nomma.txt" | tail -6 | cut -c1-220 | tee -a "$L"
  grep -q "self-check: PASS" "$O/sc-nomma.txt" && echo "=> QLIN_MMA1 breaks the bits" | tee -a "$L"
fi
step "CUDA lane tiny, every new switch"
timeout 150 $N --config /tmp/c-all.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1
echo "CUDA lane tiny: $(grep -E "gates run" "$O/gates-tiny.txt" | head -1)" | tee -a "$L"
grep -E "q8|q4" "$O/gates-tiny.txt" | grep -E "GREEN|RED|ERROR" | head -6 | cut -c1-160 | tee -a "$L"
grep -q " 0 failed" "$O/gates-tiny.txt" || ok=0
flt() { grep -E "defines|^linear |rror" "$1" | awk -v pat="$2" '/defines/ { h = "=="; n = split($0, a, /[{}, ]+/);
  for (i = 1; i <= n; i++) if (a[i] ~ pat) h = h " " a[i]; print h; next } { print }' | cut -c1-120 | tee -a "$L"; }
step "kernel table, Q4_K, M = 1: INT / + FX + LEAN / + FX + MMA1 / + FX + MMA1 at 1 tile a block"
timeout 150 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q4_k --kernel-shapes q/o,qkv,gate+up,down \
  --variants "QLIN_INT=1;QLIN_INT=1,QLIN_FX=1,QLIN_M1_LEAN=1;QLIN_INT=1,QLIN_FX=1,QLIN_MMA1=1;QLIN_INT=1,QLIN_FX=1,QLIN_MMA1=1,QLIN_MMA1_WG=1" > "$O/kbench-q4k.txt" 2>&1
flt "$O/kbench-q4k.txt" '^QLIN_(FX|M1_LEAN|MMA1|MMA1_WG)='
step "kernel table, Q8_0, M = 1: QTC_Q8_M1 1 / 2 / 2 double-buffered"
timeout 120 $N probe --bench-kernels --kernel-tokens 1 --kernel-dtypes q8_0 --kernel-shapes q/o,qkv,gate+up,down,lm-head \
  --variants "QTC_Q8_M1=1;QTC_Q8_M1=2;QTC_Q8_M1=2,QTC_Q8_DB=1" > "$O/kbench.txt" 2>&1
flt "$O/kbench.txt" '^QTC_Q8_(M1|DB)='
[ $ok = 1 ] || { step "a gate or a self-check is not green: no decode timing"; grep -E "FAIL|fail|RED|ERROR" "$O"/gates-*.txt "$O"/sc-*.txt | head -20 | cut -c1-200 | tee -a "$L"; exit 1; }
for m in m1 m2 m2 m1; do
  step "decode q8_0 bs=1, depth 128, $m"
  timeout 100 $N --backend cuda --config /tmp/c-$m.toml bench decode --model synth:llama-3.1-8b:q8_0 --batch 1 \
    --depth 128 --new-tokens 128 --reps 5 --out "$O/decode-q8-$m.jsonl" 2>&1 | grep -E "^decode|rror" \
    | sed "s/^/$m /" | cut -c1-160 | tee -a "$L"
done
step done
