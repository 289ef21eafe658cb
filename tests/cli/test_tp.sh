#!/usr/bin/env bash
# Tensor parallelism (--tp N under mpirun): the same text at every degree
# (none, 1, 2, the uneven 3 and 4 ranks) in every mode, the FULL steps at TP = 2
# replaying graphs that hold the all-reduce, each rank holding its share of
# the weights, clear errors for bad --tp values, and a killed rank ending
# the job with a non-zero status instead of a hang.
# Usage: test_tp.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
. "$(dirname "$0")/lib.sh"

if ! [ -f "$model" ]; then
  echo "SKIP: $model not found"; exit 77
fi
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  "$bin" run "$model" -p hi -n 1 -q --tp 2 >/dev/null 2>"$tmp/err"
if grep -qF "this build has no MPI" "$tmp/err"; then
  # the one check a build without MPI can make: --tp says how to get it
  grep -qF "apt-get install libopenmpi-dev openmpi-bin" "$tmp/err" ||
    { echo "FAIL: --tp without MPI does not say how to get it: $(cat "$tmp/err")"; exit 1; }
  echo "SKIP: this build has no MPI"; exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77
fi
# Open MPI keeps allocations until the process exits, which a sanitizer
# build's leak check would report as the program's: the processes that
# start MPI run without it (the split itself is leak-checked without MPI by
# model_tp_split).
no_leak_check="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi() { ASAN_OPTIONS=$no_leak_check timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$@"; }

# ---- bad --tp values -------------------------------------------------------------
expect_fail 2 "0 is outside [1, 64]" run "$model" -p hi --tp 0
ASAN_OPTIONS=$no_leak_check expect_fail 1 "MPI started 1 process" run "$model" -p hi --tp 2
mpi 2 "$bin" run "$model" -p hi -n 4 -q --tp 4 >"$tmp/out" 2>"$tmp/err"; rc=$?
{ [ "$rc" -ne 0 ] && grep -qF -- "--tp 4 but MPI started 2 processes" "$tmp/err"; } ||
  { echo "FAIL: --tp 4 on 2 ranks -> exit $rc: $(cat "$tmp/err")"; fail=1; }
mpi 5 "$bin" run "$model" -p hi -n 4 -q --tp 5 >"$tmp/out" 2>"$tmp/err"; rc=$?
{ [ "$rc" -ne 0 ] && grep -qF "4 of the feed-forward (width 172" "$tmp/err" &&
  grep -qF "use --tp 4 or less" "$tmp/err"; } ||
  { echo "FAIL: --tp 5 with 4 feed-forward shards -> exit $rc: $(cat "$tmp/err")"; fail=1; }

# ---- the same text at every degree, in every mode --------------------------------
golden="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."
prompts=(-p "Once upon a time" -p "The cat")
for mode in none piecewise full auto; do
  ref=$("$bin" run "$model" "${prompts[@]}" -n 40 --mode "$mode" -q --tp 1 2>"$tmp/err") ||
    { echo "FAIL: --tp 1 --mode $mode: $(cat "$tmp/err")"; fail=1; continue; }
  # a run without --tp is the same order, so the same text
  plain=$("$bin" run "$model" "${prompts[@]}" -n 40 --mode "$mode" -q 2>"$tmp/err")
  [ "$plain" = "$ref" ] ||
    { printf 'FAIL: --mode %s without --tp differs from --tp 1:\n%s\n---\n%s\n' "$mode" "$plain" "$ref"; fail=1; }
  case "$ref" in
    *"$golden"*) ;;
    *) echo "FAIL: --tp 1 --mode $mode lost the golden text: $ref"; fail=1 ;;
  esac
  for n in 2 3 4; do
    out=$(mpi "$n" "$bin" run "$model" "${prompts[@]}" -n 40 --mode "$mode" -q --tp "$n" \
      2>"$tmp/err") || { echo "FAIL: --tp $n --mode $mode: $(cat "$tmp/err")"; fail=1; continue; }
    [ "$out" = "$ref" ] ||
      { printf 'FAIL: --tp %s --mode %s differs from --tp 1:\n%s\n---\n%s\n' "$n" "$mode" "$out" "$ref"; fail=1; }
  done
done

# every logit bit: a hash of the logits of a run that mixes prefill chunks
# with decode (pw_tp_logits, built beside the tests)
logits_bin="$(dirname "$bin")/tests/pw_tp_logits"
if [ -x "$logits_bin" ]; then
  for mode in none piecewise full; do
    ref=$("$logits_bin" "$model" 1 "$mode" 2>"$tmp/err") || { echo "FAIL: logits --tp 1 $mode: $(cat "$tmp/err")"; fail=1; }
    for n in 2 3 4; do
      out=$(mpi "$n" "$logits_bin" "$model" "$n" "$mode" 2>"$tmp/err")
      [ -n "$ref" ] && [ "$out" = "$ref" ] ||
        { echo "FAIL: logits --tp $n $mode: '$out', --tp 1: '$ref' $(cat "$tmp/err")"; fail=1; }
    done
    echo "logits $mode: $ref at --tp 1, 2, 3, 4"
  done
else
  skip_part "$logits_bin not built"
fi

# sampling: rank 0 samples and the others take its tokens; the same seed
# gives the same text at every degree, since the logits are the same bits
sampled=(-p "Once upon a time" -n 40 --temp 0.9 --top-k 40 --seed 7 -q)
ref=$("$bin" run "$model" "${sampled[@]}" --tp 1 2>"$tmp/err") || { echo "FAIL: sampled --tp 1"; fail=1; }
out=$(mpi 2 "$bin" run "$model" "${sampled[@]}" --tp 2 2>"$tmp/err")
[ -n "$ref" ] && [ "$out" = "$ref" ] ||
  { printf 'FAIL: sampled --tp 2 differs:\n%s\n---\n%s\n' "$out" "$ref"; fail=1; }

# ---- FULL decode replays at TP = 2, and each rank's share of the weights ---------
mpi 2 "$bin" run "$model" -p "Once upon a time" -n 24 --mode full --tp 2 >/dev/null 2>"$tmp/err"
full=$(sed -n 's/.*steps: [0-9]* none, [0-9]* piecewise, \([0-9]*\) full.*/\1/p' "$tmp/err" | head -1)
[ -n "$full" ] && [ "$full" -ge 20 ] ||
  { echo "FAIL: FULL steps at --tp 2: '${full}': $(cat "$tmp/err")"; fail=1; }
w1=$("$bin" run "$model" -p hi -n 2 --tp 1 2>&1 >/dev/null | sed -n 's/^tp rank 0 of 1: \([0-9]*\) weight bytes.*/\1/p')
mpi 2 "$bin" run "$model" -p hi -n 2 --tp 2 >/dev/null 2>"$tmp/err"
for r in 0 1; do
  w=$(sed -n "s/^tp rank $r of 2: \([0-9]*\) weight bytes.*/\1/p" "$tmp/err")
  # the layers, the embedding table and the LM head all halve
  [ -n "$w" ] && [ -n "$w1" ] && [ $((w * 100)) -le $((w1 * 52)) ] ||
    { echo "FAIL: rank $r holds '$w' weight bytes of '$w1': $(cat "$tmp/err")"; fail=1; }
done
grep "^tp rank" "$tmp/err"

# ---- a killed rank ends the job -----------------------------------------------------
# rank 1 is killed once it is generating; rank 0 must not wait for it forever
# (32 requests to the end of the context in NONE mode: about 5 s of work
# unkilled on a 2-core machine, against the kill after 1 s)
many=()
for i in $(seq 1 31); do many+=(-p "x$i"); done
start=$(date +%s)
ASAN_OPTIONS=$no_leak_check timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 sh -c \
  'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (sleep 1; kill -9 $$) & fi; exec "$0" "$@"' \
  "$bin" run "$model" -p "Once upon a time" -n 2000 --mode none --tp 2 --max-seqs 16 \
  "${many[@]}" >/dev/null 2>"$tmp/err"; rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
  echo "FAIL: a killed rank -> exit $rc after ${took}s: $(cat "$tmp/err")"; fail=1
elif ! grep -qiE "signal 9|killed" "$tmp/err"; then
  echo "FAIL: a killed rank is not reported: $(cat "$tmp/err")"; fail=1
fi

finish tp
