#!/bin/bash
# First device call of 2026-11-30 (third session): the kernel self-check with the on-device
# sampler (kernels/sample.cu against the host sampler, token for token), then the CUDA lane of the
# gates on the tiny synthetic models (with canaries) and qwen3-random, where every seeded and
# speculative gate now chooses its tokens on the device. Usage: h200_run5.sh MEMRA_BINARY OUT_DIR
set -u
B=$1; O=$2; L=$O/log.txt
step() { echo "== $*" | tee -a "$L"; }
step self-check; $B probe --self-check > "$O/selfcheck.txt" 2>&1; grep -E "sample_picks|self-check|FAIL" "$O/selfcheck.txt" | tee -a "$L"
step gates tiny; $B gate --lane cuda --only tiny --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
step canaries tiny; $B gate --lane cuda --only tiny --canary --json "$O/canary.jsonl" 2>&1 | grep -E "gates run|GREEN" | tee -a "$L"
step gates qwen3; $B gate --lane cuda --only qwen3 --json "$O/gates.jsonl" 2>&1 | grep -E "gates run|FAIL|RED" | tee -a "$L"
step done
