#!/usr/bin/env bash
# PW_DEQUANTIZE=1 (f32 weights, the BLAS path of every large matmul) with
# prompts of exactly 16, 32 and 48 tokens: whole BLAS tiles for the batch,
# one sampled row for the LM head. Each run must exit 0 and report the
# prompt length it was built for, for SmolLM2 (Llama) and Gemma 3.
# tests/kernels/test_lm_head.c checks the same buffers without a model.
# Usage: test_dequantize.sh PATH/TO/piecewise
set -u
bin=$1
src="${PW_SOURCE_DIR:-.}"
smol="${PW_SMOLLM2_GGUF:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
gemma="${PW_GEMMA3_GGUF:-$src/models/gemma-3-270m-q4_k_m.gguf}"
. "$(dirname "$0")/lib.sh"

# The prompt length the run reports ("prompt N tok ...").
prompt_tokens() { sed -n 's/^prompt \([0-9]*\) tok.*/\1/p' "$1"; }

ran=0
for model in "$smol" "$gemma"; do
  [ -f "$model" ] || { echo "$(basename "$model") not found: skipped"; continue; }
  ran=1
  # "the" is one token after the first; find what one word costs with BOS
  "$bin" run "$model" --raw -p "the" -n 1 --temp 0 --mode none >/dev/null 2>"$tmp/err"
  base=$(prompt_tokens "$tmp/err")
  [ -n "$base" ] || { echo "FAIL: no prompt length from $(basename "$model"): $(cat "$tmp/err")"; fail=1; continue; }
  for want in 16 32 48; do
    words="the"
    for _ in $(seq $((want - base))); do words="$words the"; done
    PW_DEQUANTIZE=1 "$bin" run "$model" --raw -p "$words" -n 1 --temp 0 --mode none \
      >"$tmp/out" 2>"$tmp/err"; rc=$?
    got=$(prompt_tokens "$tmp/err")
    if [ $rc -ne 0 ] || [ "$got" != "$want" ]; then
      echo "FAIL: $(basename "$model") dequantized, $want-token prompt: exit $rc, prompt ${got:-?} tokens: $(tail -3 "$tmp/err")"
      fail=1
    fi
  done
done
[ $fail -eq 0 ] && [ $ran -eq 0 ] && exit 77
exit $fail
