#!/usr/bin/env bash
# GPU check for the CUDA backend. Run on a machine with an NVIDIA
# GPU, nvcc and cuBLAS, from anywhere:  scripts/gpu-check.sh [build-dir]
#   1. builds the project with PW_CUDA=ON (Release);
#   2. runs the CUDA tests (they must pass, not skip);
#   3. runs `piecewise bench model --device cuda` on stories260K and on a
#      synthetic model at Llama-3.2-1B shapes (RANDOM weights, labelled so);
#   4. where PyTorch with CUDA is installed, times torch.cuda.CUDAGraph
#      replay of the same number of kernels;
#   5. prints one table.
# Budget: under 8 minutes in all (each step has its own timeout).
set -u
SRC="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$SRC/build-gpu-check}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
JOBS="$(nproc 2>/dev/null || echo 4)"
declare -a ROWS
row() { ROWS+=("$(printf '%-44s %s' "$1" "$2")"); }
fail=0

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU visible (nvidia-smi -L failed); nothing to check" >&2
  exit 2
fi
GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

echo "== 1. build ($BUILD)"
if ! timeout 240 cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPW_CUDA=ON >"$WORK/cmake.log" 2>&1 ||
   ! timeout 240 cmake --build "$BUILD" -j "$JOBS" >"$WORK/build.log" 2>&1; then
  tail -40 "$WORK/cmake.log" "$WORK/build.log" 2>/dev/null
  echo "gpu-check: build failed" >&2
  exit 1
fi
row "build" "ok"

echo "== 2. CUDA tests"
# A skip here means the GPU was not usable: that is a failure of the check.
if timeout 120 ctest --test-dir "$BUILD" -R '^cuda_' --output-on-failure >"$WORK/ctest.log" 2>&1 &&
   ! grep -q "Skipped" "$WORK/ctest.log"; then
  row "CUDA tests" "passed ($(grep -c 'Passed' "$WORK/ctest.log") tests)"
else
  cat "$WORK/ctest.log"
  row "CUDA tests" "FAILED or skipped (see above)"
  fail=1
fi

PW="$BUILD/piecewise"
STORIES="${PW_SHARED_DIR:-$SRC/../shared}/models/stories260K.gguf"
[ -f "$STORIES" ] || STORIES="$(find "$SRC/.." -name 'stories260K*.gguf' 2>/dev/null | head -1)"

# Synthetic model: Llama-3.2-1B shapes (dim 2048, 16 layers, 32 heads, 8 KV
# heads, ffn 8192), vocab cut to 32000, f16 random weights. Written with the
# library's own GGUF writer by a tiny program compiled against the build.
SYN="$WORK/synthetic-llama-1b-random.gguf"
cat >"$WORK/make_synthetic.c" <<'EOF'
#include "model/gguf_writer.h"
#include <stdio.h>
int main(int argc, char **argv) {
    pw_tiny_llama_config c = pw_tiny_llama_default_config();
    c.dim = 2048; c.n_layers = 16; c.n_heads = 32; c.n_kv_heads = 8; c.ffn_dim = 8192;
    c.vocab_size = 32000; c.context_length = 2048; c.rope_theta = 500000.0f;
    c.weight_dtype = PW_F16; c.tied_embeddings = true; c.seed = 1234;
    if (argc > 2) { c.dim = 256; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2; c.ffn_dim = 512; c.vocab_size = 1000; }
    if (pw_tiny_llama_write_file(&c, argv[1]) != PW_OK) { fprintf(stderr, "%s\n", pw_last_error()); return 1; }
    return 0;
}
EOF
CUDA_LIB="$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64"
BLAS="$(sed -n 's/^OPENBLAS_LIBRARY:FILEPATH=\(.*libopenblas.*\)$/\1/p' "$BUILD/CMakeCache.txt" | head -1)"
if cc -O2 -std=c11 -D_GNU_SOURCE -I"$SRC/include" -I"$SRC/src" -I"$SRC/src/core" -I"$BUILD" \
      "$WORK/make_synthetic.c" "$BUILD/libpiecewise.a" -L"$CUDA_LIB" -lcudart -lcublas $BLAS \
      -lm -lpthread -ldl -o "$WORK/make_synthetic" 2>"$WORK/syn.log" &&
   timeout 120 "$WORK/make_synthetic" "$SYN" ${PW_GPU_CHECK_SMALL:+small} >>"$WORK/syn.log" 2>&1; then
  row "synthetic model (random weights)" "$(du -h "$SYN" | cut -f1) written"
else
  cat "$WORK/syn.log"
  row "synthetic model (random weights)" "FAILED to write"
  SYN=""
fi

echo "== 3. piecewise bench model --device cuda"
bench() { # label model
  local out="$WORK/bench-$1.txt"
  if [ -z "$2" ] || [ ! -f "$2" ]; then row "bench $1" "model missing"; return; fi
  if timeout 150 "$PW" bench model "$2" --device cuda >"$out" 2>&1; then
    cat "$out"
    row "bench $1 (see output above)" "ok"
  else
    tail -5 "$out"
    row "bench $1" "FAILED: $(tail -1 "$out" | cut -c1-80)"
    fail=1
  fi
}
bench stories260K "$STORIES"
bench "llama-1b-shapes-RANDOM" "$SYN"

echo "== 4. torch.cuda.CUDAGraph replay of the same kernel count"
# One decode step of stories260K is about this many kernel launches (5
# layers x 13 kernels + embedding, final norm, lm_head); override with
# PW_GPU_CHECK_KERNELS to match `piecewise inspect` output.
NK="${PW_GPU_CHECK_KERNELS:-68}"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  TORCH="$(timeout 120 python3 - "$NK" <<'EOF'
import sys, torch
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
for _ in range(50): g.replay()
torch.cuda.synchronize()
times = []
for _ in range(7):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); [g.replay() for _ in range(200)]; b.record(); torch.cuda.synchronize()
    times.append(a.elapsed_time(b) * 1000 / 200)
times.sort()
print(f"{times[len(times)//2]:.2f} us per replay of {n} kernels (median of 7)")
EOF
)"
  row "torch.cuda.CUDAGraph replay" "${TORCH:-FAILED}"
else
  row "torch.cuda.CUDAGraph replay" "skipped (no PyTorch with CUDA)"
fi

echo
echo "== piecewise GPU check on: $GPU_NAME"
printf '%s\n' "${ROWS[@]}"
exit $fail
