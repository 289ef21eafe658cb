#!/usr/bin/env bash
# Regenerates the golden tests' float64 references (tests/data/float64/*.ref)
# with scripts/float64-forward.py.
#
#   scripts/float64-references.sh BUILD_DIR [FAMILY...]
#
# FAMILY: smollm2, gemma3 (the files in models/), llama3, mistral, qwen2,
# qwen3, phi3 (synthetic files, written by BUILD_DIR's
# test_model_float64_golden --write from llama.cpp's vocabulary GGUFs in
# $PW_LLAMACPP_MODELS, default the sdist that bench/peers/llamacpp.sh fetches).
# Default: all. The prompts are token ids: for models/ files the prompts
# llama.cpp tokenized for tests/data/llamacpp, for synthetic ones fixed
# pseudo-random ids (the comparison tests the model, not the tokenizer).
# Needs the venv of scripts/float64-venv.sh (made in BUILD_DIR/f64-venv).
set -euo pipefail
build=${1:?usage: float64-references.sh BUILD_DIR [FAMILY...]}
shift
src=$(cd "$(dirname "$0")/.." && pwd)
out=$src/tests/data/float64
vocab=${PW_LLAMACPP_MODELS:-${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}/0.3.36/src/vendor/llama.cpp/models}
"$src/scripts/float64-venv.sh" "$build/f64-venv"
py=$build/f64-venv/bin/python
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} # one BLAS thread: no spinning workers on a shared machine
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(smollm2 gemma3 llama3 mistral qwen2 qwen3 phi3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/synth"
for f in "${families[@]}"; do
  case $f in
    smollm2|gemma3)
      stem=$([ "$f" = smollm2 ] && echo SmolLM2-135M-Instruct.Q4_1 || echo gemma-3-270m-q4_k_m)
      python3 -c "
import json, sys
for g in json.load(open(sys.argv[1]))['greedy']: print(' '.join(map(str, g['prompt_ids'])))
" "$src/tests/data/llamacpp/$stem.json" >"$work/$f.prompts"
      "$py" "$src/scripts/float64-forward.py" reference "$src/models/$stem.gguf" \
        --prompts "$work/$f.prompts" --steps 48 --out "$out/$stem.ref"
      ;;
    llama3|mistral|qwen2|qwen3|phi3)
      case $f in
        llama3) v=ggml-vocab-llama-bpe.gguf ;; mistral) v=ggml-vocab-llama-spm.gguf ;;
        qwen2|qwen3) v=ggml-vocab-qwen2.gguf ;; phi3) v=ggml-vocab-phi-3.gguf ;;
      esac
      "$build/tests/test_model_float64_golden" --write "$f" "$vocab/$v" "$build/synth/$f.gguf"
      # four prompts of 4-11 ids below 30000 (every vocabulary here is larger)
      python3 -c "
import random, sys
r = random.Random(sys.argv[1])
for _ in range(4): print(' '.join(str(r.randrange(300, 30000)) for _ in range(r.randrange(4, 12))))
" "$f" >"$work/$f.prompts"
      "$py" "$src/scripts/float64-forward.py" reference "$build/synth/$f.gguf" \
        --prompts "$work/$f.prompts" --steps 32 --out "$out/synth-$f.ref" --synth "$f" "$v"
      ;;
    *) echo "unknown family $f" >&2; exit 2 ;;
  esac
done
