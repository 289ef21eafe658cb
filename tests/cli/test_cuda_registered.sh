#!/usr/bin/env bash
# A build with the CUDA backend links it into the CLI and the engine test
# and registers it there: the backend's object is named by the backend
# registry, so no static link can leave it out. Without a GPU the device
# answers with the runtime's own error, never "this build has no CUDA
# backend". Needs no GPU.
bin=$1
dir=$(dirname "$bin")
source "$(dirname "$0")/lib.sh"

if ! grep -q "define PW_HAVE_CUDA 1" "$dir/pw_config.h" 2>/dev/null; then
  echo "SKIP: built without the CUDA backend"; exit 77
fi
if ! command -v nm >/dev/null; then
  echo "SKIP: nm not found"; exit 77
fi

for exe in "$bin" "$dir/tests/test_cuda_engine_cuda"; do
  if ! nm "$exe" 2>/dev/null | grep -q cudaStreamBeginCapture; then
    echo "FAIL: $exe does not contain the CUDA backend (no cudaStreamBeginCapture)"; fail=1
  fi
done

# The CLI's answer for --device cuda (any GGUF model will do).
model=${PW_SHARED_DIR:-/nonexistent}/models/stories260K.gguf
if [ -f "$model" ]; then
  "$bin" bench model "$model" --device cuda --tokens 1 --repeats 1 --batch 1 --lean \
    >"$tmp/out" 2>"$tmp/err"
  if grep -q "has no CUDA backend" "$tmp/err" "$tmp/out"; then
    echo "FAIL: the CLI says it has no CUDA backend: $(cat "$tmp/err")"; fail=1
  fi
  if ! grep -q "cuda" "$tmp/err" "$tmp/out"; then
    echo "FAIL: bench model --device cuda says nothing about the device: $(cat "$tmp/err")"; fail=1
  fi
else
  skip_part "no stories260K model for bench model --device cuda"
fi
"$dir/tests/test_cuda_engine_cuda" >"$tmp/eout" 2>&1
if grep -q "has no CUDA backend" "$tmp/eout"; then
  echo "FAIL: the engine test says it has no CUDA backend: $(cat "$tmp/eout")"; fail=1
fi
finish cuda_registered
