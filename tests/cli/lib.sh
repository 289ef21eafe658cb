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
