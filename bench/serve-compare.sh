#!/usr/bin/env bash
# piecewise serve beside llama.cpp's llama-server under the same load:
# bench/serve-load.py at 1, 4 and 16 concurrent streaming clients, one
# server at a time, same model, same threads, llama-server with -np equal
# to --max-seqs. Prints one markdown table row per run. Then the
# shared-prompt workload (16 clients, one ~1,000-token system prompt, each
# request its own question; llama-server with cache_prompt on): a second
# table with the load and the time to first token of a first request alone
# and of a second one that can reuse the cached system prompt.
#
#   bench/serve-compare.sh MODEL.gguf [SECONDS] [THREADS] [MAX_SEQS]
#
# PIECEWISE (default build/piecewise) and LLAMA_SERVER (default: the
# llama-server under ~/.cache/piecewise/llamacpp/, if any) pick the
# binaries; without a llama-server only piecewise runs.
set -u
model=${1:?usage: serve-compare.sh MODEL.gguf [SECONDS] [THREADS] [MAX_SEQS]}
seconds=${2:-20}
threads=${3:-2}
seqs=${4:-16}
here=$(cd "$(dirname "$0")" && pwd)
pw=${PIECEWISE:-$here/../build/piecewise}
ls_bin=${LLAMA_SERVER:-$(find "$HOME/.cache/piecewise/llamacpp" -type f -name llama-server -perm -u+x 2>/dev/null | head -1)}
log=$(mktemp)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$log"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_ready() { # url, seconds
  for _ in $(seq $((2 * $2))); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

run_load() { # label url
  for c in 1 4 16; do
    python3 "$here/serve-load.py" --url "$2" --clients "$c" --seconds "$seconds" --json --label "$1" |
      python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("| {label} | {clients} | {requests} | {errors} | {tok_s} | {ttft_p50_ms} | {ttft_p99_ms} | {itl_p50_ms} | {itl_p99_ms} |".format(**r))'
  done
}

shared_rows=$(mktemp)
trap 'cleanup; rm -f "$shared_rows"' EXIT

run_shared() { # label url
  python3 "$here/serve-load.py" --url "$2" --clients 16 --seconds "$seconds" --json --label "$1" \
    --workload shared-prompt --cache-prompt |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("| {label} | {clients} | {prompt_tokens} | {requests} | {errors} | {tok_s} | {ttft_p50_ms} | {itl_p99_ms} | {ttft_first_ms} | {ttft_second_ms} | {ttft_ratio} |".format(**{k: r.get(k) for k in ("label", "clients", "prompt_tokens", "requests", "errors", "tok_s", "ttft_p50_ms", "itl_p99_ms", "ttft_first_ms", "ttft_second_ms", "ttft_ratio")}))' >>"$shared_rows"
}

echo "| server | clients | requests | errors | tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |"
echo "|---|---|---|---|---|---|---|---|---|"
port=$(free_port)
"$pw" serve "$model" --port "$port" --max-seqs "$seqs" --threads "$threads" 2>"$log" &
pid=$!
if wait_ready "http://127.0.0.1:$port" 600; then
  run_load "piecewise serve" "http://127.0.0.1:$port"
  run_shared "piecewise serve" "http://127.0.0.1:$port"
else
  echo "piecewise serve did not start: $(tail -3 "$log")" >&2
fi
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=

if [ -n "$ls_bin" ] && [ -x "$ls_bin" ]; then
  port=$(free_port)
  # -c is the KV cache over all slots: 16384 positions, as piecewise's
  # engine has by default (kv_cache_positions)
  "$ls_bin" -m "$model" --host 127.0.0.1 --port "$port" -np "$seqs" -t "$threads" \
    -c 16384 >"$log" 2>&1 &
  pid=$!
  if wait_ready "http://127.0.0.1:$port" 600; then
    run_load "llama-server" "http://127.0.0.1:$port"
  else
    echo "llama-server did not start: $(tail -3 "$log")" >&2
  fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
  # llama-server splits -c evenly between its slots: the shared-prompt
  # workload needs ~1,100 positions a slot, so 2048 each here
  port=$(free_port)
  "$ls_bin" -m "$model" --host 127.0.0.1 --port "$port" -np "$seqs" -t "$threads" \
    -c $((seqs * 2048)) >"$log" 2>&1 &
  pid=$!
  if wait_ready "http://127.0.0.1:$port" 600; then
    run_shared "llama-server" "http://127.0.0.1:$port"
  else
    echo "llama-server did not start: $(tail -3 "$log")" >&2
  fi
else
  echo "llama-server not found: only piecewise measured" >&2
fi
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=

echo
echo "Shared 1,000-token system prompt (first/second: TTFT of a first request alone, and of a second with another question):"
echo
echo "| server | clients | prompt tokens | requests | errors | tok/s | TTFT p50 ms | ITL p99 ms | first TTFT ms | second TTFT ms | second/first |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
cat "$shared_rows"
