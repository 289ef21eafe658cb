#!/usr/bin/env bash
# The prefix cache does not change answers: the shared-prompt workload of
# bench/serve-load.py (one long system prompt, a question per request) as a
# fixed set of greedy requests, sent to piecewise serve with its prefix
# cache on and then to a fresh one with --no-prefix-cache, compared answer
# for answer. Exits 0 when every answer is the same, 1 when any differs or
# fails, 2 when a server does not start.
#
#   bench/serve-prefix-check.sh MODEL.gguf [REQUESTS] [THREADS] [CLIENTS] [MAX_TOKENS]
#
# Defaults: 200 requests, 2 threads, 16 clients, 32 tokens each. PIECEWISE
# (default build/piecewise) picks the binary.
set -u
model=${1:?usage: serve-prefix-check.sh MODEL.gguf [REQUESTS] [THREADS] [CLIENTS] [MAX_TOKENS]}
requests=${2:-200}
threads=${3:-2}
clients=${4:-16}
max_tokens=${5:-32}
here=$(cd "$(dirname "$0")" && pwd)
pw=${PIECEWISE:-$here/../build/piecewise}
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# one nonce for both runs: the same prompts, each run starting cold
nonce=$(python3 -c 'import random; print("%010x" % random.SystemRandom().getrandbits(40))')
for mode in on off; do
  port=$(free_port)
  flag=
  [ "$mode" = off ] && flag=--no-prefix-cache
  "$pw" serve "$model" --port "$port" --max-seqs "$clients" --threads "$threads" $flag \
    2>"$work/$mode.log" &
  pid=$!
  ready=
  for _ in $(seq 1200); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { ready=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if [ -z "$ready" ]; then
    echo "piecewise serve ($mode) did not start: $(tail -3 "$work/$mode.log")" >&2
    exit 2
  fi
  python3 "$here/serve-load.py" --url "http://127.0.0.1:$port" --workload shared-prompt \
    --nonce "$nonce" --clients "$clients" --requests "$requests" --max-tokens "$max_tokens" \
    --record "$work/$mode.json" --label "prefix cache $mode"
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^piecewise_prefix_cache_(queries|hits)_total'
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  pid=
done
python3 - "$work/on.json" "$work/off.json" <<'PY'
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:3])
missing = sum(1 for a, b in zip(on, off) if a is None or b is None)
differ = [k for k, (a, b) in enumerate(zip(on, off)) if a is not None and b is not None and a != b]
print(f"{len(differ)} of {len(on)} answers differ with the prefix cache on and off"
      f" ({missing} failed)")
for k in differ[:5]:
    print(f"  request {k}: on {on[k]!r}\n  {' ' * len(str(k))}          off {off[k]!r}")
sys.exit(1 if differ or missing else 0)
PY
