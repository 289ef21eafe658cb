#!/usr/bin/env bash
# piecewise compile: every form on the corpus, the round trip through the
# CLI, and usage/failure exit codes. Usage: test_compile.sh PATH/TO/piecewise
set -u
bin=$1
data="${PW_SOURCE_DIR:-$(dirname "$0")/../..}/tests/data/graphs"
. "$(dirname "$0")/lib.sh"
expect_ok() { # file with the expected substring, args...
  local msg=$1; shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne 0 ] || ! grep -qF -- "$msg" "$tmp/out"; then
    echo "FAIL: piecewise $* -> exit $rc, want '$msg' in: $(head -c 400 "$tmp/out") $(cat "$tmp/err")"; fail=1
  fi
}

"$bin" compile --help | grep -q "usage: piecewise compile" || { echo "FAIL: --help"; fail=1; }
expect_ok "graph submod_1 [splitting]:" compile "$data/llama_tiny.txt"
expect_ok "CALL     r0 := fn0(r2, r3, r4, p2, k0)" compile "$data/llama_tiny.txt" --emit plan
expect_ok "pw_status pw_stitch(const pw_stitch_rt *rt" compile "$data/vllm_L2.txt" --emit c
expect_ok 'subgraph "cluster_submod_1"' compile "$data/vllm_L2.txt" --emit dot
expect_ok '"llama.attn" [label=' compile "$data/llama_tiny.txt" --emit graph-dot
expect_ok "graph submod_0 [splitting]:" compile "$data/llama_tiny.txt" --split-ops embedding,attention

# the graph form prints the corpus back byte for byte; -o writes a file
for f in "$data"/*.txt; do
  "$bin" compile "$f" --emit graph -o "$tmp/g.txt" || { echo "FAIL: compile $f"; fail=1; }
  cmp -s "$f" "$tmp/g.txt" || { echo "FAIL: $f does not round-trip"; fail=1; }
done
# a split document compiles again to the same plan
"$bin" compile "$data/llama_tiny.txt" --emit split -o "$tmp/split.txt"
"$bin" compile "$data/llama_tiny.txt" --emit plan > "$tmp/plan1"
"$bin" compile "$tmp/split.txt" --emit plan > "$tmp/plan2"
cmp -s "$tmp/plan1" "$tmp/plan2" || { echo "FAIL: the split document gives a different plan"; fail=1; }

expect_fail 2 "no graph file or --model given" compile
expect_fail 2 "unknown form 'nope'" compile "$data/vllm_L2.txt" --emit nope
expect_fail 2 "--emit needs a value" compile "$data/vllm_L2.txt" --emit
expect_fail 2 "unknown option '--bogus'" compile "$data/vllm_L2.txt" --bogus
expect_fail 2 "more than one graph file" compile a.txt b.txt
expect_fail 2 "--split-ops needs at least one op name" compile "$data/vllm_L2.txt" --split-ops ,
expect_fail 1 "graph file: cannot open '/no/such.txt'" compile /no/such.txt
printf 'graph g:\n    %%x = call_function f(%%y)\n    return %%x\n' > "$tmp/bad.txt"
expect_fail 1 "line 2:26: undefined reference '%y'" compile "$tmp/bad.txt"
printf 'graph g:\n    %%x = placeholder\n    %%y = getitem(%%x, "k")\n    return %%y\n' > "$tmp/bad2.txt"
expect_fail 1 "getitem with a non-integer index" compile "$tmp/bad2.txt" --emit plan
expect_fail 1 "cannot open /no/such/dir/out.txt for writing" compile "$data/vllm_L2.txt" -o /no/such/dir/out.txt

[ $fail -eq 0 ] && echo "cli compile: all checks passed"
exit $fail
