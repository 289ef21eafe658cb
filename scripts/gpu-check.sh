#!/usr/bin/env bash
# GPU check for the CUDA backend. Run on a machine with an NVIDIA GPU, nvcc
# and cuBLAS:
#
#   scripts/gpu-check.sh [BUILD_DIR] [LOG_DIR]
#
#   1. builds the project with PW_CUDA=ON (Release);
#   2. runs the CUDA tests (they must pass, not skip);
#   3. holds the CUDA engine to the float64 rule (test_model_float64_golden
#      with PW_DEVICE=cuda: stories260K, and the synthetic Llama 3 family
#      where llama.cpp's vocabulary is at hand) and compares greedy tokens of
#      `piecewise run` on the CPU and on CUDA in NONE, PIECEWISE and FULL,
#      batched and one prompt at a time;
#   4. runs `piecewise bench model --device cuda` on stories260K (capture,
#      FULL / PIECEWISE / NONE decode at batch 1 and 8, the FULL graph
#      replayed alone, prefill);
#   5. times a graph of as many small kernels as stories260K's FULL batch-1
#      graph has nodes, against torch.cuda.CUDAGraph replaying the same
#      count, where PyTorch with CUDA is installed;
#   6. the same bench on a synthetic model with Llama-3.2-1B's shapes and
#      vocabulary (llama3 family, random Q8_0 weights, f32 on the GPU);
#   7. runs the engine tests that the emulated device runs, with
#      PW_DEVICE=cuda (reported: models the CUDA kernel set cannot run are
#      refused by name, and tests whose models are not here skip);
#   8. runs the CUDA engine test under compute-sanitizer's memcheck and
#      (9.) times each kernel of a few FULL decode steps with Nsight Compute,
#      where they are installed (reported);
#   then prints one table.
#
# Inputs: stories260K.gguf under $PW_SHARED_DIR/models (default ../shared);
# llama.cpp's ggml-vocab-llama-bpe.gguf in $PW_LLAMACPP_MODELS for the 1B
# model (without it a 32000-token vocabulary-free shape is not possible, so
# that row says "missing"). Every step has its own timeout; the whole check
# takes 4-6 minutes on a 16-core host. Logs go to LOG_DIR (default: a
# temporary folder, removed at the end).
set -u -o pipefail
SRC="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$SRC/build-gpu-check}"
BUILD="$(mkdir -p "$BUILD" && cd "$BUILD" && pwd)"
if [ -n "${2:-}" ]; then
  LOGS="$(mkdir -p "$2" && cd "$2" && pwd)"
else
  LOGS="$(mktemp -d)"
  trap 'rm -rf "$LOGS"' EXIT
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; [ -n "${2:-}" ] || rm -rf "$LOGS"' EXIT
JOBS="$(nproc 2>/dev/null || echo 4)"
declare -a ROWS
row() { # a line of the final table, also printed at once (a check cut short keeps its rows)
  ROWS+=("$(printf '%-46s %s' "$1" "$2")")
  echo "ROW ${ROWS[${#ROWS[@]}-1]}"
}
fail=0
export PW_SHARED_DIR="${PW_SHARED_DIR:-$SRC/../shared}"
STORIES="$PW_SHARED_DIR/models/stories260K.gguf"
VOCABS="${PW_LLAMACPP_MODELS:-${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}/0.3.36/src/vendor/llama.cpp/models}"
export PW_LLAMACPP_MODELS="$VOCABS"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU visible (nvidia-smi -L failed); nothing to check" >&2
  exit 2
fi
GPU_NAME="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
echo "== 0. $GPU_NAME; $(nvcc --version 2>/dev/null | tail -1); $(nproc) cores"

echo "== 1. build ($BUILD)"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# Only what the check runs: the CLI, the CUDA tests, the golden test and
# the emulated device's test list (the rest of the suite runs on the CPU).
EMU_TESTS="$(sed -n '/^set(PW_EMU_TESTS/,/)/p' "$SRC/tests/CMakeLists.txt" | tr -d '()' |
             sed 's/^set *PW_EMU_TESTS//' | tr -s ' \n' '|' | sed 's/^|//; s/|$//')"
TARGETS=(piecewise test_model_float64_golden)
for t in $(echo "$EMU_TESTS" | tr '|' ' '); do TARGETS+=("test_$t"); done
for f in "$SRC"/tests/cuda/test_*.c; do t="$(basename "$f" .c)"; TARGETS+=("test_cuda_${t#test_}"); done
t0=$(date +%s)
if ! timeout 120 cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPW_CUDA=ON \
       >"$LOGS/cmake.log" 2>&1 ||
   ! timeout 300 cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" >"$LOGS/build.log" 2>&1; then
  tail -n 40 "$LOGS/cmake.log" "$LOGS/build.log" 2>/dev/null | grep -v '^\[' 
  echo "gpu-check: build failed" >&2
  exit 1
fi
row "build (PW_CUDA=ON, Release)" "ok in $(( $(date +%s) - t0 )) s; $(grep -o 'NCCL [A-Z]*' "$LOGS/cmake.log" | head -1)"
PW="$BUILD/piecewise"

echo "== 2. CUDA tests"
# A skip here means the GPU was not usable: that is a failure of the check.
# (cuda_nccl_linked checks the build's NCCL link, and skips without NCCL.)
timeout 120 ctest --test-dir "$BUILD" -R '^cuda_' -E '^cuda_nccl_linked$' --output-on-failure \
  >"$LOGS/ctest-cuda.log" 2>&1
rc=$?
cat "$LOGS/ctest-cuda.log"
if [ $rc -eq 0 ] && ! grep -q "Skipped\|Not Run" "$LOGS/ctest-cuda.log"; then
  row "CUDA tests" "passed ($(grep -c ' Passed ' "$LOGS/ctest-cuda.log") tests)"
else
  row "CUDA tests" "FAILED or skipped (ctest-cuda.log)"
  fail=1
fi

echo "== 3a. float64 rule on CUDA"
GOLD="$BUILD/tests/test_model_float64_golden"
timeout 150 env PW_DEVICE=cuda "$GOLD" >"$LOGS/golden-cuda.log" 2>&1
rc=$?
cat "$LOGS/golden-cuda.log"
for m in stories260K llama3; do
  line="$(grep "^$m[^:]*: the 0.50 rule" "$LOGS/golden-cuda.log" | head -1)"
  if [ -n "$line" ]; then row "float64 rule on CUDA: $m" "${line#*: }"
  else row "float64 rule on CUDA: $m" "not run (model or vocabulary missing)"; fi
done
if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
  row "float64 golden test on CUDA" "FAILED (rc $rc, golden-cuda.log)"
  fail=1
fi

echo "== 3b. greedy tokens: CPU against CUDA, every mode, batched and alone"
PROMPTS=("Once upon a time" "The little dog" "Lily and Tom went to the park" "One day")
if [ -f "$STORIES" ]; then
  args=()
  for p in "${PROMPTS[@]}"; do args+=(-p "$p"); done
  ok=1
  # A batch's texts are printed "[i] text"; one prompt's without the number.
  timeout 60 "$PW" run "$STORIES" "${args[@]}" -n 64 --device cpu --mode none -q \
    2>"$LOGS/run-cpu.err" | sed 's/^\[[0-9]\] //' >"$WORK/cpu.txt" || ok=0
  for mode in none piecewise full; do
    if ! timeout 120 "$PW" run "$STORIES" "${args[@]}" -n 64 --device cuda --mode "$mode" -q \
         2>"$LOGS/run-cuda-$mode.err" | sed 's/^\[[0-9]\] //' >"$WORK/cuda-$mode.txt"; then
      ok=0; tail -3 "$LOGS/run-cuda-$mode.err"
    elif ! cmp -s "$WORK/cpu.txt" "$WORK/cuda-$mode.txt"; then
      ok=0; echo "cuda $mode differs from the CPU:"; diff "$WORK/cpu.txt" "$WORK/cuda-$mode.txt" | head -8
    fi
  done
  : >"$WORK/alone.txt"
  for p in "${PROMPTS[@]}"; do
    timeout 60 "$PW" run "$STORIES" -p "$p" -n 64 --device cuda -q >>"$WORK/alone.txt" \
      2>>"$LOGS/run-alone.err" || ok=0
  done
  cmp -s "$WORK/cpu.txt" "$WORK/alone.txt" || { ok=0; echo "cuda one prompt at a time differs"; }
  cp "$WORK"/cpu.txt "$WORK"/cuda-*.txt "$WORK/alone.txt" "$LOGS/" 2>/dev/null
  if [ $ok -eq 1 ]; then
    row "stories260K text CPU = CUDA" "identical: 3 modes, batched and alone (4 prompts x 64 tokens)"
  else
    row "stories260K text CPU = CUDA" "DIFFER or failed (run-*.err)"
    fail=1
  fi
else
  row "stories260K tokens" "model missing ($STORIES)"
fi

echo "== 4. piecewise bench model --device cuda: stories260K"
bench() { # label model
  local out="$LOGS/bench-$1.txt"
  if [ -z "$2" ] || [ ! -f "$2" ]; then row "bench $1" "model missing"; return; fi
  if timeout 180 "$PW" bench model "$2" --device cuda --batch 1,8 --tokens 64 --repeats 3 \
       >"$out" 2>&1; then
    cat "$out"
    local b
    for b in 1 8; do
      row "bench $1: FULL / NONE decode, batch $b" "$(awk -v b=$b '$2 == b && $1 == "none" {n = $3}
        $2 == b && $1 == "full" {f = $3} END {if (n > 0) printf "%.2fx (%.0f against %.0f tok/s)", f / n, f, n}' "$out")"
      row "bench $1: FULL graph replayed alone, batch $b" "$(sed -n "s/^  batch $b  *\([0-9.]* us per replay\).*(\([0-9]*\) device graph nodes); \(host work.*\)/\1, \2 nodes; \3/p" "$out")"
    done
    row "bench $1: capture" "$(sed -n 's/^capture   //p' "$out")"
  else
    tail -5 "$out"
    row "bench $1" "FAILED: $(tail -1 "$out" | cut -c1-80)"
    fail=1
  fi
}
bench stories260K "$STORIES"
echo "== 5. graph replay: piecewise against torch.cuda.CUDAGraph, same kernel count"
# As many kernels as stories260K's FULL batch-1 graph has nodes.
NK="$(sed -n 's/^  batch 1 .*(\([0-9]*\) device graph nodes).*/\1/p' "$LOGS/bench-stories260K.txt" 2>/dev/null)"
NK="${PW_GPU_CHECK_KERNELS:-${NK:-68}}"
timeout 120 "$PW" bench launch --device cuda --kernels "$NK" >"$LOGS/bench-launch.txt" 2>&1
cat "$LOGS/bench-launch.txt"
PW_REPLAY="$(sed -n 's/^  replay *\([0-9.]*\) us per graph.*/\1/p' "$LOGS/bench-launch.txt")"
row "piecewise CUDA graph replay" "${PW_REPLAY:-FAILED} us per replay of $NK kernels"
[ -n "$PW_REPLAY" ] || fail=1
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  TORCH="$(timeout 120 python3 - "$NK" <<'EOF' 2>"$LOGS/torch.err"
import sys, time, torch
n = int(sys.argv[1])
x = torch.zeros(64, device="cuda")
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(3):
        for _ in range(n): x.add_(1.0)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(n): x.add_(1.0)
times = []
for _ in range(7):  # as bench launch: 5 replays, then 200 back to back, wall clock
    for _ in range(5): g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(200): g.replay()
    torch.cuda.synchronize()
    times.append((time.perf_counter_ns() - t0) / 1e3 / 200)
times.sort()
print(f"{times[len(times)//2]:.2f}")
print(torch.__version__, file=sys.stderr)
EOF
)"
  row "torch.cuda.CUDAGraph replay" "${TORCH:-FAILED} us per replay of $NK kernels (torch $(tail -1 "$LOGS/torch.err"))"
  if [ -n "$TORCH" ] && [ -n "$PW_REPLAY" ]; then
    row "piecewise / torch replay time" "$(awk -v a="$PW_REPLAY" -v b="$TORCH" 'BEGIN{printf "%.3f", a/b}')"
  fi
else
  row "torch.cuda.CUDAGraph replay" "skipped (no PyTorch with CUDA)"
fi

echo "== 6. piecewise bench model --device cuda: Llama-3.2-1B shapes"
SYN=""
if [ -f "$VOCABS/ggml-vocab-llama-bpe.gguf" ]; then
  SYN="$WORK/llama3-1b-q8_0-random.gguf"
  timeout 120 "$PW" synth --family llama3 --shape 1b --type q8_0 \
    --vocab "$VOCABS/ggml-vocab-llama-bpe.gguf" -o "$SYN" >"$LOGS/synth.log" 2>&1 || {
    tail -3 "$LOGS/synth.log"; SYN=""; }
fi
bench llama3-1b-shapes-RANDOM "$SYN"

echo "== 7. engine tests with PW_DEVICE=cuda (reported)"
# The emulated device's list without its runtime_* tests, whose toy kernels
# are host functions (a CUDA stream refuses a kernel without a CUDA entry).
# Models that need kernels the CUDA set lacks are refused by name, and tests
# that need models not here skip.
ENGINE_TESTS="$(echo "$EMU_TESTS" | tr '|' '\n' | grep -v '^runtime_' | paste -sd '|')"
PW_DEVICE=cuda timeout 150 ctest --test-dir "$BUILD" -R "^($ENGINE_TESTS)\$" -j 8 --timeout 120 \
  --output-on-failure >"$LOGS/ctest-device-cuda.log" 2>&1
summary="$(grep -E 'tests passed|tests failed' "$LOGS/ctest-device-cuda.log" | tail -1)"
grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess)' "$LOGS/ctest-device-cuda.log"
refused="$(grep -o "the cuda kernel set has no [a-z_]* kernel" "$LOGS/ctest-device-cuda.log" | sort -u |
           sed 's/the cuda kernel set has no //; s/ kernel//' | paste -sd ' ')"
row "engine tests on CUDA" "${summary:-did not finish}${refused:+ (refused for lack of: $refused)}"

echo "== 8. compute-sanitizer memcheck of the CUDA engine test (reported)"
SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
if [ -x "$SAN" ]; then
  timeout 60 "$SAN" --tool memcheck --error-exitcode 3 "$BUILD/tests/test_cuda_engine_cuda" \
    >"$LOGS/memcheck.log" 2>&1
  rc=$?
  tail -4 "$LOGS/memcheck.log"
  case $rc in
    0) row "memcheck: CUDA engine test" "no errors ($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$LOGS/memcheck.log" | head -1))" ;;
    124) row "memcheck: CUDA engine test" "did not finish in 60 s" ;;
    *) row "memcheck: CUDA engine test" "FAILED (rc $rc, memcheck.log)"; fail=1 ;;
  esac
else
  row "memcheck: CUDA engine test" "skipped (no compute-sanitizer)"
fi

echo "== 9. GPU time per kernel in FULL decode steps (Nsight Compute, reported)"
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
if [ -n "$NCU" ] && [ -f "$STORIES" ]; then
  # the kernels after start-up and the prompt: about three decode steps
  timeout 60 "$NCU" --clock-control none --graph-profiling node --metrics gpu__time_duration.sum \
    --print-summary per-kernel --launch-skip 400 --launch-count 500 \
    "$PW" run "$STORIES" -p "Once upon a time" -n 24 --device cuda --mode full --capture-sizes 1 -q \
    >"$LOGS/ncu.txt" 2>&1
  row "ncu per-kernel summary" "rc $? (ncu.txt)"
else
  row "ncu per-kernel summary" "skipped (no ncu)"
fi

echo
echo "== piecewise GPU check on: $GPU_NAME"
printf '%s\n' "${ROWS[@]}" | tee "$LOGS/table.txt"
exit $fail
