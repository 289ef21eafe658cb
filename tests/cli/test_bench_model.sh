#!/usr/bin/env bash
# piecewise bench model: argument errors with exit codes and messages, and a
# short run whose JSON has the documented shape (no timing assertions).
# Usage: test_bench_model.sh PATH/TO/piecewise
set -u
bin=$1
model="${PW_SHARED_DIR:-../shared}/models/stories260K.gguf"
. "$(dirname "$0")/lib.sh"

expect_fail 2 "usage: piecewise bench model" bench model
expect_fail 2 "--batch expects an integer in [1, 4096], got '0'" bench model m.gguf --batch 1,0
expect_fail 2 "--batch expects an integer in [1, 4096], got 'x'" bench model m.gguf --batch x
expect_fail 2 "--batch needs at least one value" bench model m.gguf --batch ,
expect_fail 2 "--threads expects an integer in [1, 256], got '0'" bench model m.gguf --threads 0
expect_fail 2 "--threads expects an integer in [1, 256], got '0'" bench model m.gguf --threads 1,0
expect_fail 2 "at most 16 values for --threads" bench model m.gguf --threads 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1
expect_fail 2 "--repeats expects an integer" bench model m.gguf --repeats many
expect_fail 2 "unexpected argument '--bogus'" bench model m.gguf --bogus
expect_fail 1 "/no/such/model.gguf" bench model /no/such/model.gguf
"$bin" bench model --help | grep -q "usage: piecewise bench model" || { echo "FAIL: --help"; fail=1; }
expect_fail 2 "unknown option '--fast'" bench peak --fast
expect_fail 2 "--kernels: '0' is not a count from 1 to 100000" bench launch --kernels 0
expect_fail 2 "--device:" bench launch --device tpu
expect_fail 2 "unknown option '--bogus'" bench launch --bogus
if ! "$bin" bench launch --device cuda --kernels 4 >/dev/null 2>"$tmp/err"; then
  # without a GPU (or the CUDA backend) the refusal says why, exit 1
  grep -qE "device cuda: |no CUDA kernel set" "$tmp/err" || { echo "FAIL: bench launch --device cuda: $(cat "$tmp/err")"; fail=1; }
fi
"$bin" bench peak --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["peak_gflop_s"] > 0 and d["peak_int8_gop_s"] > 0 and d["stream_gb_s_1"] > 0 and d["stream_gb_s_all"] > 0 and d["cores"] >= 1 and d["peak_int8_gop_s_all"] > 0 and d["stream_gb_s_1"] == max(d["stream_gb_s_1_small_pages"], d["stream_gb_s_1_huge_pages"], d["stream_gb_s_1_prefetch"]) and d["stream_gb_s_all"] == max(d["stream_gb_s_all_small_pages"], d["stream_gb_s_all_huge_pages"], d["stream_gb_s_all_prefetch"]) and d["stream_gb_s_1_prefetch"] > 0 and 0 <= d["huge_page_share"] <= 1' \
  || { echo "FAIL: bench peak --json"; fail=1; }

if [ -f "$model" ]; then
  expect_fail 2 "exceeds the context" bench model "$model" --tokens 100000
  if ! "$bin" bench model "$model" --batch 1,2 --threads 1,2 --tokens 4 --repeats 1 --json >"$tmp/json" 2>"$tmp/err"; then
    echo "FAIL: short run: $(cat "$tmp/err")"; fail=1
  else
    python3 - "$tmp/json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
assert [(r["mode"], r["batch"]) for r in runs] == [
    (m, b) for m in ("none", "piecewise", "full") for b in (1, 2)], runs
for r in runs:
    assert r["decode_tok_s"] > 0 and r["step_ms"] > 0 and r["gflop_s"] > 0, r
    # GFLOP/s is the documented per-token work times tok/s
    assert abs(r["gflop_s"] - r["decode_tok_s"] * d["flop_per_token"] / 1e9) < 1e-3 * r["gflop_s"] + 1e-3, r
assert d["prefill_tok_s"] > 0 and d["peak_gflop_s"] > 0 and d["peak_int8_gop_s"] > 0
# int8 share: matrix-product operations per token times tok/s over the int8 peak
assert d["matmul_op_per_token"] == 2 * (5 * 45312 + 64 * 512), d["matmul_op_per_token"]
for r in runs:
    want = r["decode_tok_s"] * d["matmul_op_per_token"] / (d["peak_int8_gop_s"] * 1e9)
    assert abs(r["int8_peak_fraction"] - want) < 1e-3 * want + 1e-4, r
assert [(r["threads"], r["batch"]) for r in d["thread_scaling"]] == [(1, 1), (1, 2), (2, 1), (2, 2)], d
assert all(r["decode_tok_s"] > 0 for r in d["thread_scaling"])
# stories260K: 2 x (5 layers x 45,312 weights + 32,768 classifier) + attention at mean context 3
assert d["flop_per_token"] == 2 * (5 * (45312 + 2 * 64 * 3) + 64 * 512), d["flop_per_token"]
c = d["capture"]
assert c["graphs"] > 0 and c["ms"] > 0 and c["largest_size"] > 0, c
assert 0 < c["largest_single_bytes"] <= c["pool_peak_bytes"], c
# distinct-piece capture and the graph cache (docs/graph-cache.md)
assert c["graphs_captured"] + c["graphs_patched"] == c["graphs"] and c["graphs_patched"] > 0, c
assert c["ms_no_distinct"] > 0 and c["warm_ms"] > 0, c
assert c["warm_graphs_from_cache"] == c["graphs"], c
# FULL's graph of each decode batch, replayed alone
for r in runs:
    if r["mode"] == "full":
        assert r["replay_us"] > 0 and r["replay_launches"] > 0, r
    else:
        assert "replay_us" not in r, r
PY
  fi
  # --lean: FULL decode at every thread count and prefill, nothing else
  if ! "$bin" bench model "$model" --batch 1,2 --threads 1,2 --tokens 4 --repeats 1 --lean --json >"$tmp/lean" 2>"$tmp/err"; then
    echo "FAIL: lean run: $(cat "$tmp/err")"; fail=1
  else
    python3 - "$tmp/lean" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["lean"] is True and "capture" not in d, d
assert [(r["mode"], r["batch"]) for r in d["runs"]] == [("full", 1), ("full", 2)], d
assert [(r["threads"], r["batch"]) for r in d["thread_scaling"]] == [(1, 1), (1, 2), (2, 1), (2, 2)], d
# the runs are the first thread count's rows
assert [r["decode_tok_s"] for r in d["runs"]] == [r["decode_tok_s"] for r in d["thread_scaling"][:2]], d
assert d["prefill_tok_s"] > 0 and all(r["decode_tok_s"] > 0 for r in d["thread_scaling"]), d
# decode's bytes per token times tok/s against the read bandwidth, per thread count
assert d["weight_bytes_per_token"] > 0 and [b["threads"] for b in d["bandwidth"]] == [1, 2], d
# the model file's mapping, resident, and how much of it huge pages hold
assert 0 <= d["file_huge_page_bytes"] <= d["file_resident_bytes"], d
if sys.platform.startswith("linux"):
    assert d["file_resident_bytes"] > 0, d
for b, r in zip(d["bandwidth"], [r for r in d["thread_scaling"] if r["batch"] == 1]):
    assert b["stream_gb_s"] > 0 and b["peak_int8_gop_s"] > 0, b
    want = r["decode_tok_s"] * d["weight_bytes_per_token"] / 1e9
    assert abs(b["decode_gb_s"] - want) < 1e-3 * want + 1e-3, (b, r)
    assert abs(b["stream_fraction"] - b["decode_gb_s"] / b["stream_gb_s"]) < 1e-2 * b["stream_fraction"] + 1e-3, b
# prefill's matrix products against one core's int8 peak (per thread)
assert d["peak_int8_gop_s"] > 0 and 0 < d["prefill_int8_peak_fraction"] < 1, d
PY
  fi
  "$bin" bench model "$model" --batch 1 --tokens 4 --repeats 1 --lean >"$tmp/table" 2>&1
  grep -q "lean: FULL decode and prefill only" "$tmp/table" || { echo "FAIL: lean table"; fail=1; }
  grep -q "of the .* GB/s 1 thread read" "$tmp/table" || { echo "FAIL: lean table lacks the bandwidth share"; fail=1; }
  grep -q "the file's mapping: .* MB resident, .*% of it in 2 MiB pages" "$tmp/table" || { echo "FAIL: lean table lacks the mapping's page sizes"; fail=1; }
  grep -q "the int8 dot-product peak of 1 core" "$tmp/table" || { echo "FAIL: lean table lacks prefill's int8-peak share"; fail=1; }
  grep -q "GOP/s 1 thread reach together" "$tmp/table" || { echo "FAIL: lean table lacks decode's int8-peak share"; fail=1; }
else
  skip_part "stories260K.gguf not found: the short runs"
fi
finish cli_bench_model
