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
#   QUIET_LOAD (0.6) / QUIET_MAX (600 s): wait for a quiet machine before each measurement,
#   MEMRA (default target/release/memra), MEMRA_REBUILD (auto|1|0, see memra_fresh),
#   MODEL (smollm2-135m-instruct), GGUF (default: the cached file of MODEL).
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

wait_quiet() {
  # The machine is shared: before each measurement wait (up to QUIET_MAX seconds) until the
  # 1-minute load average is under QUIET_LOAD, and log the load either way.
  local t=0
  while awk -v l="${QUIET_LOAD:-0.6}" '{exit !($1 >= l)}' /proc/loadavg && [ "$t" -lt "${QUIET_MAX:-600}" ]; do
    sleep 10; t=$((t + 10))
  done
  echo "$(date -u +%T) $1 waited ${t}s loadavg $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$res/load.txt" >&2
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
    echo "llama_cpp=vendored in llama-cpp-python $LCPP_PY_VERSION (sdist sha256 $(cut -d' ' -f1 "$WORK/sdist.sha256" 2>/dev/null))"
    echo "llama_cpp_cmake=${CMAKE_FLAGS[*]}"
    echo "rustc=$(rustc --version)"
    echo "cc=$(gcc --version | head -1)"
  } > "$res/conditions.txt"
  cat "$res/conditions.txt"
  local memra_out=$res/memra.jsonl
  for round in $(seq 1 "$ROUNDS"); do
    wait_quiet "round $round memra"
    "$MEMRA" bench decode --model "$gguf" --backend cpu --threads "$THREADS" \
      --depth 128 --new-tokens 128 --reps "$REPS" --out "$memra_out" | tee "$res/memra-decode-$round.txt"
    "$MEMRA" bench ttft --model "$gguf" --backend cpu --threads "$THREADS" \
      --prompt-len 128 --reps "$REPS" --out "$memra_out" | tee "$res/memra-ttft-$round.txt"
    wait_quiet "round $round llama.cpp"
    # The brief's command (tg128 from an empty context, pp128), then tg128 at depth 128 so the
    # decode cell matches memra's --depth 128.
    "$lb" -m "$gguf" -t "$THREADS" -p 128 -n 128 -r "$REPS" -o jsonl | tee "$res/llama-$round.jsonl"
    "$lb" -m "$gguf" -t "$THREADS" -p 0 -n 128 -d 128 -r "$REPS" -o jsonl | tee "$res/llama-d128-$round.jsonl"
  done
  python3 "$REPO/research/cpu-board/board.py" "$res" --repo "$REPO"
}

case "${1:-all}" in
  fetch) fetch ;;
  build) build ;;
  bench) bench ;;
  all) fetch; build; bench ;;
  *) echo "usage: $0 [fetch|build|bench|all]" >&2; exit 2 ;;
esac
