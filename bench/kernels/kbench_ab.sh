#!/usr/bin/env bash
# A/B microbenchmark of the quantized matmul's copies: the tile code at a
# base commit (default main) against the working tree's, in ONE process,
# calls alternated (old, new, old, new, ...), so that the host's drift,
# which moves whole runs by 2x on a shared VM, falls on both alike.
#
#   bench/kernels/kbench_ab.sh [BASE] [COPY] [ROUNDS] [FILTER]
#     COPY: fma (AVX2, default), avxvnni, avx512vnni
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
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/ops/cpu"
for f in matmul_quant_isa.h matmul_quant_body.h "matmul_quant_$COPY.c"; do
    git -C "$HERE" show "$BASE:src/ops/cpu/$f" >"$TMP/ops/cpu/$f"
done
case $COPY in
fma) FLAGS="-mavx2 -mfma -mf16c" ;;
avxvnni) FLAGS="-mavx2 -mfma -mf16c -mavxvnni" ;;
avx512vnni) FLAGS="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni" ;;
*) echo "unknown copy $COPY" >&2; exit 2 ;;
esac
CF="-O3 -DNDEBUG -std=c11 -D_GNU_SOURCE -Wno-psabi -I$HERE/include -I$HERE/src -I$HERE/src/core -I$HERE/build"
REN="-Dpw_k_qdot_run_$COPY=kb_old_qdot -Dpw_k_q8b_quantize_rows_$COPY=kb_old_quant -Dpw_k_q8_quantize_rows_$COPY=kb_old_quant_rows"
# the base's isa.h first, so that its layout macros are the ones it was built with
cc -I"$TMP" $CF $FLAGS $REN -c "$TMP/ops/cpu/matmul_quant_$COPY.c" -o "$TMP/old.o"
TYPED=
if grep -q PW_K_Q8B_QUANTIZE_PARAMS "$TMP/ops/cpu/matmul_quant_isa.h"; then TYPED=-DKB_OLD_TYPED; fi
cc $CF -DKB_COPY_$COPY $TYPED -c "$HERE/bench/kernels/kbench_ab.c" -o "$TMP/ab.o"
# Linked as CMake links pw_kbench_matmul_quant: the same libraries (MPI,
# OpenBLAS and the CUDA runtime where the build found them).
kb=$HERE/build/CMakeFiles/pw_kbench_matmul_quant.dir
[[ -e $kb/linkLibs.rsp && -e $kb/link.txt ]] ||
    { echo "kbench_ab: build pw_kbench_matmul_quant first (cmake --build build)" >&2; exit 2; }
read -r -a linker <<<"$(sed 's/ .*//' "$kb/link.txt")"
read -r -a dirs <<<"$(sed 's/.*linkLibs.rsp//' "$kb/link.txt")"
(cd "$HERE/build" && "${linker[@]}" "$TMP/ab.o" "$TMP/old.o" @"$kb/linkLibs.rsp" "${dirs[@]//\"/}" -o "$TMP/ab")
"$TMP/ab" "$ROUNDS" "$FILTER"
