#!/usr/bin/env bash
# scripts/llamacpp-reference.py without llama.cpp: with stand-in
# llama-server builds in a scratch cache that die before they are healthy
# (as the native build does by SIGILL on a VM that lists AMX and refuses
# it), it tries native, noamx and portable in turn, names each death and
# keeps its log, and then stops with a clear message and exit status 1,
# writing no reference; an explicit --server that dies is the only one
# tried; no build at all, or no model file, is refused with the reason.
# Needs python3. Usage: test_reference_maker.sh (the piecewise argument of
# the CLI tests is not used).
set -u
src=${PW_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
maker=$src/scripts/llamacpp-reference.py
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp PW_LLAMACPP_CACHE=$tmp/cache LLAMACPP_PY_VERSION=test
cache=$tmp/cache/test
fail=0

run() { # run CODE SUBSTRING ARGS...: exit CODE, stderr holds SUBSTRING
  local code=$1 msg=$2; shift 2
  python3 "$maker" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$msg" "$tmp/err"; then
    echo "FAIL: llamacpp-reference.py $* -> exit $rc (want $code, '$msg'):"; cat "$tmp/err"; fail=1
  fi
}

model=$tmp/m.gguf
echo "not a gguf file" >"$model"
run 1 "no model file $tmp/none.gguf" "$tmp/none.gguf" --out "$tmp/refs"
run 1 "no llama-server under $cache: run bench/peers/llamacpp.sh build" "$model" --out "$tmp/refs"

# Stand-ins that log their flavour and die by SIGILL.
for f in native noamx portable; do
  mkdir -p "$cache/$f"
  printf '#!/usr/bin/env bash\necho "%s started" >>"%s"\nkill -ILL $$\n' "$f" "$tmp/tried" >"$cache/$f/llama-server"
  chmod +x "$cache/$f/llama-server"
done
run 1 "no llama-server build ran the model" "$model" --out "$tmp/refs"
[ "$(tr '\n' ',' <"$tmp/tried" 2>/dev/null)" = "native started,noamx started,portable started," ] ||
  { echo "FAIL: builds tried: $(cat "$tmp/tried")"; fail=1; }
[ "$(grep -c 'exited with -4 before it was healthy' "$tmp/err")" = 3 ] ||
  { echo "FAIL: each death not named:"; cat "$tmp/err"; fail=1; }
log=$(grep -m1 -o 'log: [^)]*' "$tmp/err" | cut -c6-)
[ -n "$log" ] && [ -f "$log" ] || { echo "FAIL: the dead server's log '$log' was not kept"; fail=1; }
[ ! -e "$tmp/refs" ] || { echo "FAIL: a reference was written"; fail=1; }

: >"$tmp/tried"
run 1 "no llama-server build ran the model" "$model" --out "$tmp/refs" --server "$cache/noamx/llama-server"
[ "$(cat "$tmp/tried")" = "noamx started" ] || { echo "FAIL: --server tried: $(cat "$tmp/tried")"; fail=1; }

[ $fail -eq 0 ] && echo "cli_reference_maker: all checks passed"
exit $fail
