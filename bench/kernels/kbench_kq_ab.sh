#!/usr/bin/env bash
# A/B microbenchmark of the K-quant decode tiles: the tile code at a base
# commit (default main) against the working tree's, in ONE process, calls
# alternated, so that the host's drift, which moves whole runs by 2x on a
# shared VM, falls on both alike (kbench_kq_ab.c says what it prints).
#
#   bench/kernels/kbench_kq_ab.sh [BASE] [COPY] [ROUNDS] [FILTER] [stream|l2]
#     COPY: fma (AVX2), avxvnni, avx512vnni (default)
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
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/ops/cpu"
for f in matmul_kquant_isa.h matmul_kquant_body.h "matmul_kquant_$COPY.c"; do
    git -C "$HERE" show "$BASE:src/ops/cpu/$f" >"$TMP/ops/cpu/$f"
done
case $COPY in
fma) FLAGS="-mavx2 -mfma -mf16c" ;;
avxvnni) FLAGS="-mavx2 -mfma -mf16c -mavxvnni" ;;
avx512vnni) FLAGS="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni" ;;
*) echo "unknown copy $COPY" >&2; exit 2 ;;
esac
CF="-O3 -DNDEBUG -std=c11 -D_GNU_SOURCE -Wno-psabi -I$HERE/include -I$HERE/src -I$HERE/src/core -I$HERE/build"
REN="-Dpw_k_kqdot_run_$COPY=kb_old_kqdot -Dpw_k_q8k_quantize_rows_$COPY=kb_old_kquant"
REN="$REN -Dpw_k_q5_0_offsets_$COPY=kb_old_q5_offsets"
# the base's headers first, so that its tile macros are the ones it was built with
cc -I"$TMP" $CF $FLAGS $REN -c "$TMP/ops/cpu/matmul_kquant_$COPY.c" -o "$TMP/old.o"
cc $CF -DKB_COPY_$COPY -c "$HERE/bench/kernels/kbench_kq_ab.c" -o "$TMP/ab.o"
# Linked as CMake links pw_kbench_decode: the same libraries.
kb=$HERE/build/CMakeFiles/pw_kbench_decode.dir
[[ -e $kb/linkLibs.rsp && -e $kb/link.txt ]] ||
    { echo "kbench_kq_ab: build pw_kbench_decode first (cmake --build build)" >&2; exit 2; }
read -r -a linker <<<"$(sed 's/ .*//' "$kb/link.txt")"
read -r -a dirs <<<"$(sed 's/.*linkLibs.rsp//' "$kb/link.txt")"
(cd "$HERE/build" && "${linker[@]}" "$TMP/ab.o" "$TMP/old.o" @"$kb/linkLibs.rsp" "${dirs[@]//\"/}" -o "$TMP/ab")
"$TMP/ab" "$ROUNDS" "$FILTER" "$MODE"
