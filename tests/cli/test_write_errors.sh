#!/usr/bin/env bash
# Output that cannot be written (standard output on /dev/full or closed, an
# -o file on /dev/full) ends in a non-zero exit and one message naming what
# failed, for every command that writes. Usage: test_write_errors.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
graph="${PW_SOURCE_DIR:-$(dirname "$0")/../..}/tests/data/graphs/vllm_L2.txt"
. "$(dirname "$0")/lib.sh"

[ -c /dev/full ] || { echo "no /dev/full: skipped"; exit 77; }

# full MESSAGE ARGS...: stdout on /dev/full -> exit 1, MESSAGE once on stderr.
full() {
  local msg=$1; shift
  timeout -k 5 60 "$bin" "$@" </dev/null >/dev/full 2>"$tmp/err"; local rc=$?
  local n; n=$(grep -cF -- "$msg" "$tmp/err")
  if [ $rc -ne 1 ] || [ "$n" -ne 1 ]; then
    echo "FAIL: piecewise $* >/dev/full -> exit $rc (want 1), message seen $n times (want 1): $(cat "$tmp/err")"; fail=1
  fi
}
stdout_msg="piecewise: error writing standard output"

full "$stdout_msg" --help
full "$stdout_msg" --version
full "$stdout_msg" run --help
full "$stdout_msg" bench --help
full "$stdout_msg" demo
full "$stdout_msg" compile "$graph"
full "$stdout_msg" compile "$graph" --emit c
expect_fail 1 "piecewise compile: error writing /dev/full: No space left on device" compile "$graph" -o /dev/full
if [ -f "$model" ]; then
  full "$stdout_msg" run "$model" -p "Once upon a time" -n 8 -q
  full "$stdout_msg" run "$model" -p "Once upon a time" -n 8
  full "$stdout_msg" run "$model" -p "Once upon a time" -p "Hi" -n 8 -q
  full "$stdout_msg" inspect "$model"
  # a closed standard output is a failed write too
  "$bin" run "$model" -p "Once upon a time" -n 8 -q >&- 2>"$tmp/err"; rc=$?
  [ $rc -eq 1 ] && grep -qF "error writing standard output" "$tmp/err" ||
    { echo "FAIL: run with stdout closed -> exit $rc: $(cat "$tmp/err")"; fail=1; }
else
  echo "stories260K.gguf not found: model commands skipped"
fi
# and output that was written ends in 0
"$bin" compile "$graph" >"$tmp/out" 2>"$tmp/err" || { echo "FAIL: compile to a file: $(cat "$tmp/err")"; fail=1; }
exit $fail
