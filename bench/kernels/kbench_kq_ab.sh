#!/usr/bin/env bash
# A/B microbenchmark of the K-quant decode tiles: the tile code at a base
# commit (default main) against the working tree's, in ONE process, calls
# alternated, so that the host's drift, which moves whole runs by 2x on a
# shared VM, falls on both alike (kbench_kq_ab.c says what it prints).
#
#   bench/kernels/kbench_kq_ab.sh [BASE] [COPY] [ROUNDS] [FILTER] [stream|l2] [ROWS]
#     COPY: fma (AVX2), avxvnni, avx512vnni (default)
#     ROWS: activation rows per product (default 1, decode; 16, 128: batches)
#   KB_PAGES=small: weights in malloc's 4 KiB pages instead of 2 MiB pages
#     (kbench_util.h; decode reads a model file mapped in 2 MiB pages
#     where the page cache holds it so, docs/gguf.md)
#
# Needs a built tree (build/libpw_ops.a etc.). The base's
# matmul_kquant_{isa.h,body.h,COPY.c} are compiled with their symbols
# renamed (kb_old_*); both sides read the same activation rows.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
BASE=${1:-main}
COPY=${2:-avx512vnni}
ROUNDS=${3:-15}
FILTER=${4:-}
MODE=${5:-stream}
ROWS=${6:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=bench/kernels/kbench_ab_lib.sh
source "$HERE/bench/kernels/kbench_ab_lib.sh"
kb_fetch_base "$BASE" "$TMP" matmul_kquant_isa.h matmul_kquant_body.h "matmul_kquant_$COPY.c"
# the row-lane panels' part of the body, where the base has it
if git -C "$HERE" cat-file -e "$BASE:src/ops/cpu/matmul_kquant_lanes_body.h" 2>/dev/null; then
    kb_fetch_base "$BASE" "$TMP" matmul_kquant_lanes_body.h
fi
kb_copy_flags "$COPY"
REN="-Dpw_k_kqdot_run_$COPY=kb_old_kqdot -Dpw_k_q8k_quantize_rows_$COPY=kb_old_kquant"
REN="$REN -Dpw_k_q5_0_offsets_$COPY=kb_old_q5_offsets -Dpw_k_kqdot_run_strided_$COPY=kb_old_kqdot_strided"
REN="$REN -Dpw_k_kqdot_run_shards_$COPY=kb_old_kqdot_shards"
# the base's headers first, so that its tile macros are the ones it was built with
cc -I"$TMP" $KB_CFLAGS $KB_FLAGS $REN -c "$TMP/ops/cpu/matmul_kquant_$COPY.c" -o "$TMP/old.o"
cc $KB_CFLAGS -DKB_COPY_$COPY -c "$HERE/bench/kernels/kbench_kq_ab.c" -o "$TMP/ab.o"
kb_link pw_kbench_decode "$TMP/ab" "$TMP/ab.o" "$TMP/old.o"
"$TMP/ab" "$ROUNDS" "$FILTER" "$MODE" "$ROWS"
