#!/usr/bin/env bash
# scripts/llamacpp-reference-diff.py on the committed SmolLM2 reference:
# a file against itself agrees (exit 0); a copy whose continuation of one
# prompt is changed at a step of margin >= 0.02 fails the near-tie rule
# (exit 1, the step marked), and changed at a near-tie it passes; different
# model files, a missing file or one that is not a reference are refused
# (exit 2, the reason). Needs python3. Usage: test_reference_diff.sh (the
# piecewise binary argument of the CLI tests is not used).
set -u
src=${PW_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$src/scripts/llamacpp-reference-diff.py
ref=$src/tests/data/llamacpp/SmolLM2-135M-Instruct.Q4_1.json
gemma=$src/tests/data/llamacpp/gemma-3-270m-q4_k_m.json
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

run() { # run CODE SUBSTRING ARGS...: exit CODE, stdout+stderr hold SUBSTRING
  local code=$1 msg=$2; shift 2
  python3 "$tool" "$@" >"$tmp/out" 2>&1; local rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$msg" "$tmp/out"; then
    echo "FAIL: reference-diff $* -> exit $rc (want $code, '$msg'):"; cat "$tmp/out"; fail=1
  fi
}

run 0 "prompts first differing at A's margin >= 0.02 (marked *): 0" "$ref" "$ref"
run 0 "margins moved by up to 0.0000" "$ref" "$ref"

# Prompt 0, step k: token changed. mutate K OUT
mutate() {
  python3 - "$ref" "$2" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
k = int(sys.argv[3])
g = j["greedy"][0]
g["tokens"][k] += 1
g["margins"][k] += 0.5
json.dump(j, open(sys.argv[2], "w"))
PY
}
# The first step whose margin is at least 0.02, and one below it, if any.
read -r big small < <(python3 - "$ref" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["greedy"][0]["margins"]
big = next(k for k, v in enumerate(m) if v >= 0.02)
small = next((k for k, v in enumerate(m) if v < 0.02), -1)
print(big, small)
PY
)
mutate "$big" "$tmp/big.json"
run 1 "(marked *): 1" "$ref" "$tmp/big.json"
grep -qE "^'The capital of France is' +$big \*" "$tmp/out" || { echo "FAIL: step $big not marked:"; cat "$tmp/out"; fail=1; }
if [ "$small" -ge 0 ]; then
  mutate "$small" "$tmp/small.json"
  run 0 "(marked *): 0" "$ref" "$tmp/small.json"
fi

run 2 "different model files" "$ref" "$gemma"
run 2 "$tmp/none.json: not a reference file" "$ref" "$tmp/none.json"
echo '{"greedy": [{"prompt": "x", "tokens": [1, 2], "margins": [0.5]}]}' >"$tmp/bad.json"
run 2 "2 tokens, 1 margins" "$tmp/bad.json" "$ref"

[ $fail -eq 0 ] && echo "cli_reference_diff: all checks passed"
exit $fail
