#!/bin/bash
# Prepared in the sixth session (not yet run): speculative decoding on the GPU with a real model.
# SmolLM2-135M-Instruct's Q4_1 file (98 MB, ../shared/MODELS.md) travels in two parts in two
# calls made within the warm window: call 1 carries target/parts/smol.00 and copies it to /tmp;
# call 2 carries smol.01, joins, checks the sha256, re-quantizes to Q8_0 with `memra quantize`
# and runs `bench spec` (n-gram, K = 4 and 8, the three prompt classes) with the tensor-core
# kernels (QTC=1) and with QLIN_INT=1, then plain bs=1 decode for both.
# Split here: split -b 49200000 -d -a 2 SmolLM2-135M-Instruct.Q4_1.gguf target/parts/smol.
# Usage (call 2): h200_next_b.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
cat /tmp/smol.00 target/parts/smol.01 > /tmp/smol-q4_1.gguf
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  /tmp/smol-q4_1.gguf" | sha256sum -c - | tee -a "$L" || exit 1
$B quantize /tmp/smol-q4_1.gguf /tmp/smol-q8_0.gguf --force | tee -a "$L"
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/tc.toml
printf '[kernel_defines]\nQLIN_INT = "1"\n' > /tmp/int.toml
for c in tc int; do
  step "spec $c"
  $B --backend cuda --config /tmp/$c.toml bench spec --model /tmp/smol-q8_0.gguf --method ngram --k 4,8 \
    --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -8 | tee -a "$L"
  $B --backend cuda --config /tmp/$c.toml bench decode --model /tmp/smol-q8_0.gguf --batch 1 --depth 128 \
    --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step done
