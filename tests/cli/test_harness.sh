#!/usr/bin/env bash
# The CLI tests' harness (tests/cli/lib.sh): finish passes only when every
# part ran, reports a skip (77) when a part was skipped, fails on a failure.
set -u
lib="$(dirname "$0")/lib.sh"
. "$lib"
status() { # FAIL SKIP: the exit status of finish after that state
  (fail=$1; skipped=0; [ "$2" = 1 ] && skip_part "simulated" >/dev/null; finish simulated >/dev/null)
  echo $?
}
for want in "0 0 0" "1 0 1" "0 1 77" "1 1 1"; do
  set -- $want
  got=$(status "$1" "$2")
  [ "$got" = "$3" ] || { echo "FAIL: fail=$1 skipped=$2: finish exits $got, want $3"; fail=1; }
done
finish cli_harness
