#!/usr/bin/env bash
# piecewise serve beside llama.cpp's llama-server under the same load, on
# the same GGUF with the same thread count, one server at a time:
# bench/serve-load.py with the plain chat workload at 1, 4 and 16 streaming
# clients, then the shared-prompt workload (16 clients, one ~1,000-token
# system prompt, each request its own question; llama-server with
# cache_prompt on). Prints one side-by-side table, piecewise / llama-server
# ratios, and whether each of the serving targets is met:
#   - 16 clients: throughput >= 2.5x llama-server's, p99 inter-token
#     latency <= llama-server's;
#   - time to first token p50 <= llama-server's at every client count;
#   - shared prompt: the second request's TTFT <= 0.2x the first's, and the
#     throughput ratio at least the plain workload's at 16 clients.
#
#   bench/serve-compare.sh MODEL.gguf [SECONDS] [THREADS] [MAX_SEQS]
#
# Defaults: 20 s per point, 2 threads, 16 sequences (llama-server -np 16).
# PIECEWISE (default build/piecewise) and LLAMA_SERVER (default: the
# llama-server under ~/.cache/piecewise/llamacpp/, if any) pick the binaries;
# without a llama-server only piecewise runs. CLIENTS (default "1 4 16")
# picks the plain workload's client counts. OUT=DIR keeps every run's JSON
# and both servers' logs there. Each row shows the load average at its
# start: figures taken on a busy machine compare nothing (llama-server's
# threads wait for each other at every operation, so it slows far more than
# piecewise when another process takes part of a core).
set -u
model=${1:?usage: serve-compare.sh MODEL.gguf [SECONDS] [THREADS] [MAX_SEQS]}
seconds=${2:-20}
threads=${3:-2}
seqs=${4:-16}
clients=${CLIENTS:-1 4 16}
here=$(cd "$(dirname "$0")" && pwd)
pw=${PIECEWISE:-$here/../build/piecewise}
ls_bin=${LLAMA_SERVER:-$(find "$HOME/.cache/piecewise/llamacpp" -type f -name llama-server -perm -u+x 2>/dev/null | head -1)}
out=${OUT:-}
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
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

run_all() { # name url
  for c in $clients; do
    python3 "$here/serve-load.py" --url "$2" --clients "$c" --seconds "$seconds" --json \
      --rss-pid "$pid" --label "$1" >"$work/$1-plain-$c.json" || rm -f "$work/$1-plain-$c.json"
  done
  python3 "$here/serve-load.py" --url "$2" --clients "$seqs" --seconds "$seconds" --json \
    --rss-pid "$pid" --label "$1" --workload shared-prompt --cache-prompt \
    >"$work/$1-shared.json" || rm -f "$work/$1-shared.json"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs" >&2
port=$(free_port)
"$pw" serve "$model" --port "$port" --max-seqs "$seqs" --threads "$threads" 2>"$work/piecewise.log" &
pid=$!
if wait_ready "http://127.0.0.1:$port" 600; then
  run_all piecewise "http://127.0.0.1:$port"
else
  echo "piecewise serve did not start: $(tail -3 "$work/piecewise.log")" >&2
fi
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=

if [ -n "$ls_bin" ] && [ -x "$ls_bin" ]; then
  port=$(free_port)
  # llama-server splits -c evenly between its slots: the shared-prompt
  # workload needs ~1,100 positions a slot, so 2048 each (piecewise's
  # engine holds 16384 positions by default, shared by all sequences)
  "$ls_bin" -m "$model" --host 127.0.0.1 --port "$port" -np "$seqs" -t "$threads" \
    -c $((seqs * 2048)) >"$work/llama-server.log" 2>&1 &
  pid=$!
  if wait_ready "http://127.0.0.1:$port" 600; then
    run_all llama-server "http://127.0.0.1:$port"
  else
    echo "llama-server did not start: $(tail -3 "$work/llama-server.log")" >&2
  fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
else
  echo "llama-server not found: only piecewise measured" >&2
fi
[ -n "$out" ] && mkdir -p "$out" && cp "$work"/* "$out"/

python3 - "$work" "$seqs" $clients <<'PY'
import json, os, sys
work, seqs, clients = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]

def load(name):
    try:
        with open(os.path.join(work, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def fmt(x):
    if x is None or (isinstance(x, float) and x != x):  # absent, or NaN: no sample
        return "-"
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)

def times(r):
    return "-" if r is None else f"{r:g}x"

def ratio(a, b, key):
    if not a or not b or not a.get(key) or not b.get(key):
        return None
    return round(a[key] / b[key], 2)

rows = [(f"plain, {c} clients", load(f"piecewise-plain-{c}"), load(f"llama-server-plain-{c}"))
        for c in clients]
rows.append((f"shared prompt, {seqs} clients", load("piecewise-shared"), load("llama-server-shared")))
print("| workload | tok/s piecewise | tok/s llama-server | ratio | TTFT p50 ms pw / ls "
      "| ITL p99 ms pw / ls | server CPU ms/token pw / ls | unfinished pw / ls | load avg pw / ls |")
print("|---|---|---|---|---|---|---|---|---|")
for label, a, b in rows:
    g = lambda r, k: fmt(r.get(k)) if r else "-"
    print(f"| {label} | {g(a, 'tok_s')} | {g(b, 'tok_s')} | {times(ratio(a, b, 'tok_s'))} "
          f"| {g(a, 'ttft_p50_ms')} / {g(b, 'ttft_p50_ms')} | {g(a, 'itl_p99_ms')} / {g(b, 'itl_p99_ms')} "
          f"| {g(a, 'server_cpu_ms_per_tok')} / {g(b, 'server_cpu_ms_per_tok')} "
          f"| {g(a, 'unfinished')} / {g(b, 'unfinished')} | {g(a, 'load_start')} / {g(b, 'load_start')} |")
loads = [r["load_start"] for _, x, y in rows for r in (x, y) if r and r.get("load_start") is not None]
if loads and max(loads) > 0.5 * (os.cpu_count() or 1):
    print(f"\nWarning: load average up to {max(loads):g} on {os.cpu_count()} CPUs during these runs: "
          "other work shared the cores, so these figures compare nothing.")
for name in ("piecewise", "llama-server"):
    s = load(f"{name}-shared")
    if s:
        print(f"\n{name}, shared prompt of {fmt(s.get('prompt_tokens'))} tokens: TTFT of a first "
              f"request alone {fmt(s.get('ttft_first_ms'))} ms, of a second "
              f"{fmt(s.get('ttft_second_ms'))} ms (second/first {fmt(s.get('ttft_ratio'))})"
              + (f"; probe failed: {s['probe_error']}" if s.get("probe_error") else ""))

print("\nTargets:")
def target(what, ok):
    print(f"- {what}: {'met' if ok else ('not met' if ok is not None else 'no figure')}")
top = max(clients)
a, b = load(f"piecewise-plain-{top}"), load(f"llama-server-plain-{top}")
r_plain = ratio(a, b, "tok_s")
target(f"{top} clients: throughput >= 2.5x llama-server's ({times(r_plain)})",
       None if r_plain is None else r_plain >= 2.5)
def at_most(a, b, key):
    """a[key] <= b[key], or None when either has no figure."""
    x, y = (r and r.get(key) for r in (a, b))
    if not isinstance(x, (int, float)) or not isinstance(y, (int, float)) or x != x or y != y:
        return None
    return x <= y

target(f"{top} clients: p99 ITL <= llama-server's "
       f"({fmt(a and a.get('itl_p99_ms'))} vs {fmt(b and b.get('itl_p99_ms'))} ms)",
       at_most(a, b, "itl_p99_ms"))
for c in clients:
    a, b = load(f"piecewise-plain-{c}"), load(f"llama-server-plain-{c}")
    target(f"{c} clients: TTFT p50 <= llama-server's "
           f"({fmt(a and a.get('ttft_p50_ms'))} vs {fmt(b and b.get('ttft_p50_ms'))} ms)",
           at_most(a, b, "ttft_p50_ms"))
s = load("piecewise-shared")
target(f"shared prompt: second TTFT <= 0.2x the first ({fmt(s and s.get('ttft_ratio'))})",
       None if not (s and s.get("ttft_ratio") is not None) else s["ttft_ratio"] <= 0.2)
r_shared = ratio(s, load("llama-server-shared"), "tok_s")
target(f"shared prompt: throughput ratio ({times(r_shared)}) >= the plain one at {top} clients "
       f"({times(r_plain)})", None if r_shared is None or r_plain is None else r_shared >= r_plain)
PY
