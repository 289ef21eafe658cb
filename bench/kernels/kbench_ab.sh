#!/usr/bin/env bash
# A/B microbenchmark of the quantized matmul's copies: the tile code at a
# base commit (default main) against the working tree's, in ONE process,
# calls alternated (old, new, old, new, ...), so that the host's drift,
# which moves whole runs by 2x on a shared VM, falls on both alike.
#
#   bench/kernels/kbench_ab.sh [BASE] [COPY] [ROUNDS] [FILTER] [MODE]
#     COPY: fma (AVX2, default), avxvnni, avx512vnni
#     FILTER: substrings of the shapes' labels name/type/T/, comma-separated
#       (q4_0x16/1/: Q4_0x16 at T = 1)
#     MODE: cache (default: each shape's weights read again call after
#       call) or stream (repeated over copies of at least 256 MiB, read
#       from memory as decode reads them; prints GB/s of weights too)
#
# Needs a built tree (build/libpw_ops.a etc.). The base's
# matmul_quant_{isa.h,body.h,COPY.c} are compiled with their symbols
# renamed (kb_old_*); each side quantizes with its own quantizer (their
# layouts may differ) and the output bits are compared.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
BASE=${1:-main}
COPY=${2:-fma}
ROUNDS=${3:-15}
FILTER=${4:-}
MODE=${5:-cache}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=bench/kernels/kbench_ab_lib.sh
source "$HERE/bench/kernels/kbench_ab_lib.sh"
kb_fetch_base "$BASE" "$TMP" matmul_quant_isa.h matmul_quant_body.h "matmul_quant_$COPY.c"
kb_copy_flags "$COPY"
REN="-Dpw_k_qdot_run_$COPY=kb_old_qdot -Dpw_k_qdot_run_strided_$COPY=kb_old_qdot_strided -Dpw_k_q8b_quantize_rows_$COPY=kb_old_quant -Dpw_k_q8_quantize_rows_$COPY=kb_old_quant_rows"
# the base's isa.h first, so that its layout macros are the ones it was built with
cc -I"$TMP" $KB_CFLAGS $KB_FLAGS $REN -c "$TMP/ops/cpu/matmul_quant_$COPY.c" -o "$TMP/old.o"
TYPED=
if grep -q PW_K_Q8B_QUANTIZE_PARAMS "$TMP/ops/cpu/matmul_quant_isa.h"; then TYPED=-DKB_OLD_TYPED; fi
cc $KB_CFLAGS -DKB_COPY_$COPY $TYPED -c "$HERE/bench/kernels/kbench_ab.c" -o "$TMP/ab.o"
kb_link pw_kbench_matmul_quant "$TMP/ab" "$TMP/ab.o" "$TMP/old.o"
"$TMP/ab" "$ROUNDS" "$FILTER" "$MODE"
