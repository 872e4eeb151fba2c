#!/bin/bash
# Second device call of the sixth session: the tensor-core linear kernels (kernels/linear_tc.cu,
# QTC=1; BF16 and Q8_0), never run before. The self-check with QTC=1 (against the CPU, rows
# across M = 1, 3, 8, 9, 33, fused+bias bits); the linear kernels at M = 1, 8, 32 for QTC 0/1 and
# the QTC knobs; the CUDA lane (qwen3-random, tiny models) and cuda-graphs canaries with QTC=1;
# then on the 8B shape with QTC=1: bs=1 and bs=32 decode (BF16, Q8_0) and a 1,024-token prefill.
# Usage: h200_run20.sh MEMRA OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
printf '[kernel_defines]\nQTC = "1"\n' > /tmp/tc.toml
step "self-check QTC=1"; $B --config /tmp/tc.toml probe --self-check > "$O/selfcheck-tc.txt" 2>&1
grep -E "linear_|self-check|FAIL|no  |rror" "$O/selfcheck-tc.txt" | tee -a "$L"
step kbench; $B probe --bench-kernels --kernel-tokens 1,8,32 \
  --variants "QTC=0;QTC=1;QTC=1,QTC_XSPLIT=2;QTC=1,QTC_SPLIT=4;QTC=1,QTC_WT=1;QTC=1,QTC_UNROLL=2" > "$O/kbench.txt" 2>&1
grep -E "defines|(BF16|Q8_0).*(gate\+up|down|q/o) " "$O/kbench.txt" | tee -a "$L"
step "gates QTC=1"; $B --config /tmp/tc.toml gate --lane cuda --only qwen3 --json "$O/gates.jsonl" > "$O/gates-qwen3.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-qwen3.txt" | tee -a "$L"
$B --config /tmp/tc.toml gate --lane cuda --only tiny --json "$O/gates.jsonl" > "$O/gates-tiny.txt" 2>&1; grep -E "gates run|FAIL|RED" "$O/gates-tiny.txt" | tee -a "$L"
step canaries; $B --config /tmp/tc.toml gate --lane cuda --canary --json "$O/canary.jsonl" > "$O/canary.txt" 2>&1; grep -E "canaries run|GREEN|FAIL" "$O/canary.txt" | tee -a "$L"
for d in bf16 q8_0; do
  step "decode bs=1 depth 128 $d QTC=1"
  $B --backend cuda --config /tmp/tc.toml bench decode --model synth:llama-3.1-8b:$d --batch 1 --depth 128 \
    --new-tokens 256 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
for d in bf16 q8_0; do
  step "decode bs=32 depth 128 $d QTC=1"
  $B --backend cuda --config /tmp/tc.toml bench decode --model synth:llama-3.1-8b:$d --batch 32 --depth 128 \
    --new-tokens 64 --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -1 | tee -a "$L"
done
step "ttft 1024 bf16 QTC=1"
$B --backend cuda --config /tmp/tc.toml bench ttft --model synth:llama-3.1-8b:bf16 --prompt-len 1024 \
  --reps 3 --out "$O/bench.jsonl" 2>&1 | tail -2 | tee -a "$L"
step done
