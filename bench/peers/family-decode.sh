#!/usr/bin/env bash
# Decode at batch 1 with 1 thread on each model family's synthetic file,
# piecewise against llama.cpp on the same file in the same run:
#
#   bench/peers/family-decode.sh [--shape 1b] [--type q4_k] [--rounds 3] [--tokens 32] [FAMILY...]
#
# FAMILY: llama3 mistral qwen2 qwen3 phi3 (default: all). Each file is
# `piecewise synth --family FAMILY --shape SHAPE --type TYPE` over the
# family's vocabulary from llama.cpp's models/ folder (the peer cache of
# bench/peers/llamacpp.sh), kept in ~/.cache/piecewise/synth. Each round
# runs `llama-bench -p 0 -n TOKENS -r 1 -t 1` and `piecewise bench model
# --lean --batch 1 --threads 1 --tokens TOKENS --repeats 1`, in alternating
# order. Printed per family, medians over the rounds:
#   - wall-clock decode tok/s of each (what each tool reports) and their ratio;
#   - decode tok/s per CPU second: piecewise's from the stepping thread's CPU
#     time (bench model), llama.cpp's from the difference of the process CPU
#     time (user + sys) between -n TOKENS and -n 4, so start-up cancels. On a
#     loaded machine the wall-clock figures mostly measure the load; the CPU
#     figures much less so (memory bandwidth is still shared).
# Also prints the CPU model and the load average before and after.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pw=${PW_BIN:-$root/build/piecewise}
version=${LLAMACPP_PY_VERSION:-0.3.36}
cache=${PW_LLAMACPP_CACHE:-$HOME/.cache/piecewise/llamacpp}/$version
bench=${LLAMA_BENCH:-$cache/native/llama-bench}
vocabs=$cache/src/vendor/llama.cpp/models
shape=1b type=q4_k rounds=3 tokens=32
families=()
while (($#)); do
  case $1 in
    --shape) shape=$2; shift 2 ;;
    --type) type=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) families+=("$1"); shift ;;
  esac
done
((${#families[@]})) || families=(llama3 mistral qwen2 qwen3 phi3)
[[ -x $pw ]] || { echo "family-decode: $pw not built" >&2; exit 1; }
[[ -x $bench ]] || { echo "family-decode: no llama-bench at $bench (bench/peers/llamacpp.sh builds it)" >&2; exit 1; }
((tokens > 4)) || { echo "family-decode: --tokens must be above 4" >&2; exit 2; }

vocab_of() {
  case $1 in
    llama3) echo ggml-vocab-llama-bpe.gguf ;; mistral) echo ggml-vocab-llama-spm.gguf ;;
    qwen2|qwen3) echo ggml-vocab-qwen2.gguf ;; phi3) echo ggml-vocab-phi-3.gguf ;;
    *) echo "family-decode: unknown family '$1'" >&2; return 1 ;;
  esac
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# CPU seconds (user + sys) of a command; its stdout to $out.
cpu_of() { /usr/bin/time -f "%U %S" -o "$tmp/time" "$@" >"$out" 2>/dev/null; awk '{print $1 + $2}' "$tmp/time"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); shape $shape, type $type, $rounds rounds of $tokens tokens"
printf '%-8s %10s %10s %7s %12s %12s %7s\n' family "llama t/s" "pw t/s" ratio "llama t/cpu" "pw t/cpu" ratio
for fam in "${families[@]}"; do
  v=$(vocab_of "$fam")
  file=$("$pw" synth --family "$fam" --shape "$shape" --type "$type" --vocab "$vocabs/$v" 2>/dev/null)
  # both engines map the file from the page cache: the same pages for
  # both, in 2 MiB folios where the kernel makes them (docs/gguf.md)
  "$pw" cache "$file" | sed -n '1p;$p' | sed "s|^|page cache: |" >&2
  : >"$tmp/lw"; : >"$tmp/pwall"; : >"$tmp/lc"; : >"$tmp/pc"
  for ((r = 0; r < rounds; r++)); do
    for who in llama pw; do
      # alternate which engine runs first
      if (( r % 2 )); then who=$([[ $who == llama ]] && echo pw || echo llama); fi
      if [[ $who == llama ]]; then
        c_long=$(cpu_of "$bench" -m "$file" -p 0 -n "$tokens" -r 1 -t 1 -o json)
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["samples_ts"][0])' "$out" >>"$tmp/lw"
        c_short=$(cpu_of "$bench" -m "$file" -p 0 -n 4 -r 1 -t 1 -o json)
        awk -v a="$c_long" -v b="$c_short" -v n="$tokens" 'BEGIN {print (a > b) ? (n - 4) / (a - b) : 0}' >>"$tmp/lc"
      else
        "$pw" bench model "$file" --lean --batch 1 --threads 1 --tokens "$tokens" --repeats 1 --json >"$out" 2>/dev/null
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(r["decode_tok_s"], r["decode_tok_s_cpu"])' "$out" >"$tmp/p"
        cut -d' ' -f1 "$tmp/p" >>"$tmp/pwall"; cut -d' ' -f2 "$tmp/p" >>"$tmp/pc"
      fi
    done
  done
  lw=$(median <"$tmp/lw"); pwl=$(median <"$tmp/pwall"); lc=$(median <"$tmp/lc"); pc=$(median <"$tmp/pc")
  awk -v f="$fam" -v lw="$lw" -v pw="$pwl" -v lc="$lc" -v pc="$pc" \
    'BEGIN {printf "%-8s %10.2f %10.2f %6.2fx %12.2f %12.2f %6.2fx\n", f, lw, pw, pw / lw, lc, pc, (lc > 0) ? pc / lc : 0}'
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
