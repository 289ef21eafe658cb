#!/usr/bin/env bash
# Tensor parallelism on the real models (models/: SmolLM2-135M, Gemma 3
# 270M): every logit bit the same at --tp 1, 2 and 4 and without --tp, in
# NONE, PIECEWISE and FULL (pw_tp_logits hashes them). SmolLM2 has 9 query
# heads in 3 KV-head groups, so --tp 4 replicates KV heads; Gemma 3 has one
# KV head, replicated on every rank, and its per-head q/k norms, sliding
# window layers, soft-capped tied LM head split by vocabulary. Also the
# FULL decode replays at --tp 2, and each rank's weight bytes.
# Usage: test_tp_models.sh PATH/TO/piecewise
set -u
bin=$1
. "$(dirname "$0")/lib.sh"
models="${PW_MODELS_DIR:-${PW_SOURCE_DIR:-.}/models}"
logits_bin="$(dirname "$bin")/tests/pw_tp_logits"
if "$bin" run /nonexistent -p hi --tp 2 2>&1 | grep -qF "this build has no MPI"; then
  echo "SKIP: this build has no MPI"; exit 77
fi
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
[ -x "$logits_bin" ] || { echo "SKIP: $logits_bin not built"; exit 77; }
no_leak_check="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi() { ASAN_OPTIONS=$no_leak_check timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$@"; }

# PW_SMOLLM2_GGUF / PW_GEMMA3_GGUF name the files as for the other model
# tests (a path that does not exist leaves that model out, as the
# sanitizer run does)
for name in SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m; do
  case $name in
  SmolLM2*) model="${PW_SMOLLM2_GGUF:-$models/$name.gguf}" ;;
  *) model="${PW_GEMMA3_GGUF:-$models/$name.gguf}" ;;
  esac
  [ -f "$model" ] || { skip_part "$model not found"; continue; }
  for mode in none piecewise full; do
    ref=$("$logits_bin" "$model" 1 "$mode" 2>"$tmp/err") ||
      { echo "FAIL: $name logits --tp 1 $mode: $(cat "$tmp/err")"; fail=1; continue; }
    for n in 2 4; do
      out=$(mpi "$n" "$logits_bin" "$model" "$n" "$mode" 2>"$tmp/err")
      [ -n "$ref" ] && [ "$out" = "$ref" ] ||
        { echo "FAIL: $name logits --tp $n $mode: '$out', --tp 1: '$ref' $(cat "$tmp/err")"; fail=1; }
    done
    echo "$name $mode: $ref at --tp 1, 2, 4"
  done
  # the text without --tp is --tp 1's, and --tp 2 decodes in FULL replays
  args=(--raw -p "Once upon a time" -n 16 --mode full --capture-sizes 1)
  plain=$("$bin" run "$model" "${args[@]}" -q 2>"$tmp/err")
  out=$(mpi 2 "$bin" run "$model" "${args[@]}" --tp 2 2>"$tmp/err")
  [ -n "$plain" ] && [ "$out" = "$plain" ] ||
    { printf 'FAIL: %s --tp 2 text differs from a run without --tp:\n%s\n---\n%s\n' "$name" "$out" "$plain"; fail=1; }
  full=$(sed -n 's/.*steps: [0-9]* none, [0-9]* piecewise, \([0-9]*\) full.*/\1/p' "$tmp/err" | head -1)
  [ -n "$full" ] && [ "$full" -ge 15 ] ||
    { echo "FAIL: $name FULL steps at --tp 2: '$full': $(cat "$tmp/err")"; fail=1; }
  echo "$name --tp 2: $full FULL decode replays"
  grep "^tp rank" "$tmp/err"
done
finish tp_models
