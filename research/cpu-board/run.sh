#!/usr/bin/env bash
# The CPU board (issue 8 item 6): SmolLM2-135M decode and prefill on this machine, memra's CPU
# backend against llama.cpp built from source here, same GGUF file and thread count, interleaved
# (memra, llama.cpp, memra, llama.cpp) so drift hits both.
#
# Usage: research/cpu-board/run.sh [fetch|build|bench|all]   (default: all)
#   fetch  llama.cpp source: the sdist of llama-cpp-python (vendors llama.cpp) from PyPI into $WORK
#   build  llama-bench, CPU only, AVX2/FMA/F16C, no -march=native (AMX/AVX-512 paths off), 2 jobs
#   bench  the interleaved runs; raw outputs under $WORK/results-<stamp>/, memra rows (with the
#          llama.cpp figures filled in as `anchor`) appended to research/tune-data/cpu-<slug>.jsonl
# Environment: WORK (default /tmp/llamacpp), THREADS (2), ROUNDS (2), REPS (5),
#   IDLE_MAX (0.3 cores busy = idle), OTHERS_MAX (0.25 cores), ATTEMPTS (5), QUIET_MAX (1800 s):
#   see `guarded`,
#   MEMRA (default target/release/memra), MEMRA_REBUILD (auto|1|0, see memra_fresh),
#   MODEL (smollm2-135m-instruct), GGUF (default: the cached file of MODEL),
#   TUNE_DATA (default research/tune-data/cpu-<cpu model slug>.jsonl).
# Nothing of llama.cpp lands in the repository. cargo runs only under `flock /tmp/cargo.lock`.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-/tmp/llamacpp}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
REPS=${REPS:-5}
MODEL=${MODEL:-smollm2-135m-instruct}
MEMRA=${MEMRA:-$REPO/target/release/memra}
LCPP_PY_VERSION=${LCPP_PY_VERSION:-0.3.16}
SRC=$WORK/llama_cpp_python-$LCPP_PY_VERSION/vendor/llama.cpp
BUILD=$WORK/build
JOBS=${JOBS:-2}
CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF
  -DGGML_BACKEND_DL=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
  -DBUILD_SHARED_LIBS=OFF)

fetch() {
  mkdir -p "$WORK"
  local tgz=$WORK/llama_cpp_python-$LCPP_PY_VERSION.tar.gz
  if [ ! -f "$tgz" ]; then
    # --no-binary for this package only: `:all:` would also build cmake/ninja from source.
    python3 -m pip download --no-binary llama-cpp-python --no-deps \
      "llama-cpp-python==$LCPP_PY_VERSION" -d "$WORK"
  fi
  [ -d "$SRC" ] || tar -xzf "$tgz" -C "$WORK"
  sha256sum "$tgz" | tee "$WORK/sdist.sha256"
}

build() {
  command -v cmake >/dev/null || python3 -m pip install cmake
  cmake -S "$SRC" -B "$BUILD" "${CMAKE_FLAGS[@]}"
  cmake --build "$BUILD" --target llama-bench -j "$JOBS"
  "$BUILD/bin/llama-bench" --help >/dev/null
}

memra_fresh() {
  # MEMRA_REBUILD=auto (default): rebuild the release binary when it is missing or older than a
  # source file; 1: always; 0: never (use the binary as it is, e.g. while others edit the tree).
  local mode=${MEMRA_REBUILD:-auto} newest=""
  if [ "$mode" = auto ] && [ -x "$MEMRA" ]; then
    newest=$(find "$REPO/engine/src" "$REPO/harness/src" "$REPO/kernels" -type f -newer "$MEMRA" | head -1)
  fi
  if [ "$mode" = 1 ] || { [ "$mode" = auto ] && { [ ! -x "$MEMRA" ] || [ -n "$newest" ]; }; }; then
    (cd "$REPO" && flock /tmp/cargo.lock cargo build --release -p memra)
  fi
  [ -x "$MEMRA" ] || { echo "no $MEMRA" >&2; exit 1; }
}

# The machine is shared, and a measurement that competes with someone else's build for the two
# cores says nothing (llama.cpp's OpenMP threads collapse to a few tok/s; rayon suffers less). So
# each measurement waits for an idle machine and is repeated when other processes used more than
# OTHERS_MAX cores on average while it ran (system busy time from /proc/stat minus the
# measurement's own CPU time). Every attempt is logged in load.txt.
busy_jiffies() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
CLK=$(getconf CLK_TCK)

wait_idle() {
  local t=0 b0 b1
  while [ "$t" -lt "${QUIET_MAX:-1800}" ]; do
    b0=$(busy_jiffies); sleep 5; b1=$(busy_jiffies); t=$((t + 5))
    awk -v d=$((b1 - b0)) -v c="$CLK" -v m="${IDLE_MAX:-0.3}" 'BEGIN{exit !(d / c / 5 < m)}' && break
  done
  echo "$t"
}

# guarded LABEL FINAL FN: runs `FN TRYFILE` until it ran on a quiet machine (at most ATTEMPTS
# times), then appends TRYFILE to FINAL.
guarded() {
  local label=$1 final=$2 fn=$3 try=$res/try.$1 attempt waited b0 b1 t0 t1 cpu verdict
  for attempt in $(seq 1 "${ATTEMPTS:-5}"); do
    waited=$(wait_idle)
    rm -f "$try" "$try.txt"
    b0=$(busy_jiffies); t0=$(date +%s.%N)
    cpu=$( ( "$fn" "$try" >&2; times ) | tail -1 | awk '{
      split($1, u, "m"); split($2, s, "m"); sub("s", "", u[2]); sub("s", "", s[2]);
      print u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
    b1=$(busy_jiffies); t1=$(date +%s.%N)
    verdict=$(awk -v d=$((b1 - b0)) -v c="$CLK" -v own="$cpu" -v t0="$t0" -v t1="$t1" \
      -v m="${OTHERS_MAX:-0.25}" 'BEGIN{o = (d / c - own) / (t1 - t0);
        printf "%s others %.2f cores over %.0fs (own %.1f cpu-s)", (o <= m ? "ok" : "busy"), o, t1 - t0, own}')
    echo "$(date -u +%T) $label attempt $attempt waited ${waited}s: $verdict" | tee -a "$res/load.txt" >&2
    case $verdict in ok*) break ;; esac
  done
  cat "$try" >> "$final"
}

bench() {
  memra_fresh
  local gguf=${GGUF:-$HOME/.cache/memra/models/$MODEL/$MODEL.gguf}
  [ -f "$gguf" ] || "$MEMRA" pull "$MODEL"
  local lb=$BUILD/bin/llama-bench
  [ -x "$lb" ] || { echo "no $lb: run '$0 build' first" >&2; exit 1; }
  local stamp; stamp=$(date -u +%Y%m%dT%H%M%SZ)
  local res=$WORK/results-$stamp
  mkdir -p "$res"
  # Conditions.
  {
    echo "date_utc=$(date -u +%FT%TZ)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "cores=$(nproc)"
    echo "flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512_vnni|avx512_bf16|amx_tile)$' | tr '\n' ' ')"
    echo "threads=$THREADS"
    echo "file=$gguf"
    echo "file_sha256=$(sha256sum "$gguf" | cut -d' ' -f1)"
    echo "memra_commit=$(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD -- engine harness kernels || echo +dirty)"
    echo "memra_binary=$MEMRA (built $(date -u -r "$MEMRA" +%FT%TZ); its commit is in each row)"
    echo "llama_cpp=$(git -C "$SRC" log -1 --format='%h %cs' 2>/dev/null || echo '?'), vendored in llama-cpp-python $LCPP_PY_VERSION (sdist sha256 $(cut -d' ' -f1 "$WORK/sdist.sha256" 2>/dev/null))"
    echo "llama_cpp_cmake=${CMAKE_FLAGS[*]}"
    echo "rustc=$(rustc --version)"
    echo "cc=$(gcc --version | head -1)"
  } > "$res/conditions.txt"
  cat "$res/conditions.txt"
  local memra_out=$res/memra.jsonl
  m_decode() { "$MEMRA" bench decode --model "$gguf" --backend cpu --threads "$THREADS" \
    --depth 128 --new-tokens 128 --reps "$REPS" --out "$1" > "$1.txt"; }
  m_ttft() { "$MEMRA" bench ttft --model "$gguf" --backend cpu --threads "$THREADS" \
    --prompt-len 128 --reps "$REPS" --out "$1" > "$1.txt"; }
  # The brief's command (tg128 from an empty context, pp128), then tg128 at depth 128 so the
  # decode cell matches memra's --depth 128.
  l_brief() { "$lb" -m "$gguf" -t "$THREADS" -p 128 -n 128 -r "$REPS" -o jsonl > "$1"; }
  l_d128() { "$lb" -m "$gguf" -t "$THREADS" -p 0 -n 128 -d 128 -r "$REPS" -o jsonl > "$1"; }
  for round in $(seq 1 "$ROUNDS"); do
    guarded "memra-decode-$round" "$memra_out" m_decode
    guarded "memra-ttft-$round" "$memra_out" m_ttft
    guarded "llama-$round" "$res/llama-$round.jsonl" l_brief
    guarded "llama-d128-$round" "$res/llama-d128-$round.jsonl" l_d128
  done
  cat "$memra_out"
  python3 "$REPO/research/cpu-board/board.py" "$res" --repo "$REPO" ${TUNE_DATA:+--tune-data "$TUNE_DATA"}
}

case "${1:-all}" in
  fetch) fetch ;;
  build) build ;;
  bench) bench ;;
  all) fetch; build; bench ;;
  *) echo "usage: $0 [fetch|build|bench|all]" >&2; exit 2 ;;
esac
