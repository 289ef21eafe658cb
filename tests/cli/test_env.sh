#!/usr/bin/env bash
# Every environment variable piecewise reads, set to a bad value: the
# command does what it does without it (same exit status, same output), and
# stderr carries exactly one warning naming the variable and what it
# accepts. Usage: test_env.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
. "$(dirname "$0")/lib.sh"

if [ ! -f "$model" ]; then
  echo "stories260K.gguf not found: skipped"
  exit 77
fi

# Runs piecewise ARGS with none of the variables set except NAME=VALUE.
run_clean() {
  env -u PW_LOG_LEVEL -u PW_KERNEL_ISA -u PW_DEQUANTIZE -u PW_SHARDS -u PW_CC -u CC -u TMPDIR "$@"
}

# expect_warning NAME VALUE ACCEPTED ARGS...: exit 0, and stderr has one
# warning naming NAME that says ACCEPTED. Leaves stdout in $tmp/out.
expect_warning() {
  local name=$1 value=$2 accepted=$3; shift 3
  run_clean "$name=$value" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $name='$value' piecewise $* -> exit $rc: $(cat "$tmp/err")"; fail=1; return 1
  fi
  local n
  n=$(grep -c "$name='" "$tmp/err")
  [ "$n" -eq 1 ] || { echo "FAIL: $name='$value': $n warnings naming it (want 1): $(cat "$tmp/err")"; fail=1; }
  grep -qF -- "$accepted" "$tmp/err" \
    || { echo "FAIL: $name='$value': the warning does not say '$accepted': $(cat "$tmp/err")"; fail=1; }
}

# Variables the model run reads: the generated text is the same.
run_args=(run "$model" -p "Once upon a time" -n 12 -q)
run_clean "$bin" "${run_args[@]}" >"$tmp/run.ref" 2>"$tmp/err" \
  || { echo "FAIL: reference run: $(cat "$tmp/err")"; exit 1; }
expect_run() {
  expect_warning "$@" "${run_args[@]}" || return
  cmp -s "$tmp/out" "$tmp/run.ref" || { echo "FAIL: $1='$2' changed the text: $(cat "$tmp/out")"; fail=1; }
}
# PW_LOG_LEVEL=bogus used to recurse until the stack overflowed (exit 139).
expect_run PW_LOG_LEVEL bogus "error, warn, info or debug"
expect_run PW_LOG_LEVEL DEBUG "error, warn, info or debug"
expect_run PW_KERNEL_ISA avx512 "auto, generic, avx2, avx-vnni or avx512-vnni"
expect_run PW_DEQUANTIZE yes "0 or 1"
expect_run PW_SHARDS bogus "copy or in-place"
# o's and down's shards read in place (the default) or copied out: no
# warning, the same text
for shards in in-place copy; do
  run_clean PW_SHARDS=$shards "$bin" "${run_args[@]}" >"$tmp/out" 2>"$tmp/err" \
    || { echo "FAIL: PW_SHARDS=$shards: $(cat "$tmp/err")"; fail=1; }
  [ -s "$tmp/err" ] && { echo "FAIL: PW_SHARDS=$shards warned: $(cat "$tmp/err")"; fail=1; }
  cmp -s "$tmp/out" "$tmp/run.ref" || { echo "FAIL: PW_SHARDS=$shards changed the text: $(cat "$tmp/out")"; fail=1; }
done

# Variables of native stitching (bench stitch compiles the stitching
# function): the default applies, so the function still compiles. Timings
# vary, so only the report's shape (its line count) is compared.
stitch_args=(bench stitch --layers 2 --repeats 1 --json)
run_clean "$bin" "${stitch_args[@]}" >"$tmp/stitch.ref" 2>"$tmp/err" \
  || { echo "FAIL: reference bench stitch: $(cat "$tmp/err")"; exit 1; }
expect_stitch() {
  expect_warning "$@" "${stitch_args[@]}" || return
  [ "$(wc -l <"$tmp/out")" = "$(wc -l <"$tmp/stitch.ref")" ] \
    || { echo "FAIL: $1='$2' changed the report: $(cat "$tmp/out")"; fail=1; }
  if grep -q "native stitching unavailable" "$tmp/err"; then
    echo "FAIL: $1='$2': the default was not used: $(cat "$tmp/err")"; fail=1
  fi
}
expect_stitch PW_CC "cc; touch $tmp/reached-the-shell" "a compiler command"
[ -e "$tmp/reached-the-shell" ] && { echo "FAIL: PW_CC reached the shell"; fail=1; }
expect_stitch CC 'cc`id`' "a compiler command"
expect_stitch TMPDIR /no/such/directory "an existing directory"
expect_stitch TMPDIR relative/dir "an existing directory"

[ $fail -eq 0 ] && echo "cli_env: all checks passed"
exit $fail
