# Shared by the CLI tests (sourced, not run): a scratch directory, a failure
# flag, and expect_fail CODE SUBSTRING ARGS... which runs "$bin" ARGS and
# checks the exit code and that stderr contains SUBSTRING.
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect_fail() {
  local code=$1 msg=$2; shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$msg" "$tmp/err"; then
    echo "FAIL: piecewise $* -> exit $rc (want $code), stderr: $(cat "$tmp/err")"; fail=1
  fi
}

# skip_part REASON: one part of the test cannot run (a model or a tool is
# missing). The rest still runs, and finish then reports a skip (exit 77,
# CTest's SKIP_RETURN_CODE), never a pass.
skipped=0
skip_part() {
  echo "SKIP (part): $*"; skipped=1
}

# finish NAME: the exit status: 1 if a check failed, 77 if a part was
# skipped, 0 otherwise.
finish() {
  if [ "$fail" -ne 0 ]; then exit 1; fi
  if [ "$skipped" -ne 0 ]; then echo "SKIP: $1: some parts could not run (see above)"; exit 77; fi
  echo "$1: all checks passed"; exit 0
}
