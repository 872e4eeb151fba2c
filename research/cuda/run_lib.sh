#!/bin/bash
# Shared by the device run scripts from run 119 on (source it; earlier scripts keep their own
# copies as the record of what ran). Sets L (the log), t0; `step` logs a timed heading, `mk NAME
# K=V ...` writes /tmp/c-NAME.toml with those kernel defines, `green CONFIG` runs the self-check
# (f32 and f16 cache) and the CUDA gate lanes tiny and qwen3 with /tmp/c-CONFIG.toml and fails
# unless all pass. `left SECONDS WHAT` fails (and says so) once SECONDS have passed since
# run_start; `ttft DTYPE CONFIG...` times the 1,024-token TTFT (N = 5) of each config in turn
# while B - 40 seconds have not passed (B: the seconds the call may run, set by the script), each
# call within TT seconds (default 60; a config's first call also compiles its kernels: give it 110).
# Usage: N=MEMRA O=OUT_DIR; source research/cuda/run_lib.sh; run_start h200-only|any
run_start() {
  L=$O/log.txt
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee -a "$L"
  case "$gpu" in
  *H200*) ;;
  *) if [ "$1" = h200-only ]; then echo "not an H200: stop" | tee -a "$L"; exit 1; fi
     N="$N --device-defaults boards/defaults/nvidia-h200.toml"; echo "not an H200: $N" | tee -a "$L";;
  esac
  t0=$(date +%s)
}
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$L"; }
mk() { local f=/tmp/c-$1.toml; shift; printf '[kernel_defines]\n' > $f; for kv in "$@"; do printf '%s = "%s"\n' "${kv%%=*}" "${kv#*=}" >> $f; done; }
green() {
  local ok=0 kv g
  for kv in f32 f16; do
    step "self-check, $kv cache, config $1"
    timeout 120 $N --config /tmp/c-$1.toml --kv-cache-dtype $kv probe --self-check > "$O/sc-$kv.txt" 2>&1
    grep -E "self-check: |FAIL|rror" "$O/sc-$kv.txt" | tail -4 | cut -c1-200 | tee -a "$L"
    grep -q "self-check: PASS" "$O/sc-$kv.txt" || ok=1
  done
  for g in tiny qwen3; do
    timeout 90 $N --config /tmp/c-$1.toml gate --lane cuda --only $g --json "$O/gates.jsonl" > "$O/gates-$g.txt" 2>&1
    echo "CUDA lane $g: $(grep -E "gates run" "$O/gates-$g.txt" | head -1)" | tee -a "$L"
    grep -q " 0 failed" "$O/gates-$g.txt" || ok=1
  done
  return $ok
}
left() { [ $(( $(date +%s) - t0 )) -lt $1 ] || { step "no time left for: $2"; return 1; }; }
ttft() {  # ttft DTYPE CONFIG...
  local d=$1 c; shift
  for c in "$@"; do
    left $((B - 40)) "ttft $d $c" || return
    step "ttft $d 1024, $c"
    timeout ${TT:-60} $N --backend cuda --config /tmp/c-$c.toml bench ttft --model synth:llama-3.1-8b:$d --prompt-len 1024 \
      --reps 5 --out "$O/ttft-$d.jsonl" 2>&1 | grep -E "^ttft|rror" | sed "s/^/$c /" | cut -c1-160 | tee -a "$L"
  done
}
