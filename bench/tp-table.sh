#!/usr/bin/env bash
# Tensor parallelism on one machine: TP = 1 against TP = 2 on one model,
# as a markdown table (docs/tensor-parallel.md).
#
#   bench/tp-table.sh MODEL.gguf [--tokens N] [--prompt TEXT]
#
# Runs `piecewise run MODEL --raw -p TEXT -n N --mode full --capture-sizes 1`
# (N default 16) twice:
#   - TP = 1: one process with 2 threads (--tp 1 --threads 2);
#   - TP = 2: `mpirun -np 2`, 1 thread per rank (--tp 2 --threads 1),
# the issue's speed comparison (the same two cores either way), and prints
# per rank: weight bytes, peak RSS (and its ratio to TP = 1), decode
# tokens/s, and the share of the steps' time spent in the all-reduce's
# gathers, from the `tp rank` lines `piecewise run --tp` prints. The load
# average before and after says how busy the machine was: on a shared
# machine the speed figures are noise, the memory figures are not.
#
# Environment: PW_BUILD (the build folder, default ./build), MPIRUN_FLAGS
# (default --allow-run-as-root --oversubscribe).
set -euo pipefail
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
model=$1; shift
tokens=16 prompt="Once upon a time"
while [ $# -gt 0 ]; do
  case "$1" in
    --tokens) tokens=${2:?--tokens needs a count}; shift 2 ;;
    --prompt) prompt=${2:?--prompt needs text}; shift 2 ;;
    *) echo "tp-table: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "tp-table: $model is not a file" >&2; exit 2; }
bin="${PW_BUILD:-./build}/piecewise"
[ -x "$bin" ] || { echo "tp-table: $bin not built (set PW_BUILD)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "tp-table: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
read -r -a flags <<<"${MPIRUN_FLAGS:---allow-run-as-root --oversubscribe}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(run "$model" --raw -p "$prompt" -n "$tokens" --mode full --capture-sizes 1)

load_before=$(cut -d' ' -f1 /proc/loadavg)
"$bin" "${args[@]}" --tp 1 --threads 2 >/dev/null 2>"$tmp/tp1" ||
  { echo "tp-table: TP = 1 failed: $(cat "$tmp/tp1")" >&2; exit 1; }
mpirun "${flags[@]}" -np 2 "$bin" "${args[@]}" --tp 2 --threads 1 >/dev/null 2>"$tmp/tp2" ||
  { echo "tp-table: TP = 2 failed: $(cat "$tmp/tp2")" >&2; exit 1; }
load_after=$(cut -d' ' -f1 /proc/loadavg)

# field N of rank R's `tp rank` line in FILE
rank_field() { sed -n "s/^tp rank $2 of [0-9]*: \([0-9]*\) weight bytes, \([0-9]*\) KV cache bytes, peak RSS \([0-9]*\) KiB; all-reduce gathers [0-9.]* us\/step (\([0-9.]*\)% .*/\\$3/p" "$1"; }
decode() { sed -n 's/.*decode [0-9]* tok at \([0-9.]*\) tok\/s.*/\1/p' "$1" | head -1; }
rss1=$(rank_field "$tmp/tp1" 0 3)
echo "model: $model, $tokens new tokens, load average $load_before before, $load_after after"
echo
echo "| run | rank | weight bytes | peak RSS | RSS / TP 1 | decode tok/s | all-reduce share |"
echo "|---|---|---|---|---|---|---|"
echo "| TP = 1, 2 threads | 0 | $(rank_field "$tmp/tp1" 0 1) | $((rss1 / 1024)) MiB | 1.00 | $(decode "$tmp/tp1") | $(rank_field "$tmp/tp1" 0 4)% |"
for r in 0 1; do
  rss=$(rank_field "$tmp/tp2" "$r" 3)
  ratio=$(awk -v a="$rss" -v b="$rss1" 'BEGIN { printf "%.2f", a / b }')
  tok=$([ "$r" = 0 ] && decode "$tmp/tp2" || echo "(rank 0's)")
  echo "| TP = 2, 1 thread per rank | $r | $(rank_field "$tmp/tp2" "$r" 1) | $((rss / 1024)) MiB | $ratio | $tok | $(rank_field "$tmp/tp2" "$r" 4)% |"
done
