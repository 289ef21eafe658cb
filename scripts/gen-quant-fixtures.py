#!/usr/bin/env python3
"""Regenerates tests/data/quant/*.bin, the reference blocks for the GGUF
dequantizers (tests/model/test_quant_reference.c).

The reference values come from an implementation independent of piecewise:
the numpy quantizers and dequantizers in the `gguf` Python package
(gguf/quants.py, maintained with llama.cpp). They were made with gguf 0.19.0
and numpy 2.x in a throwaway virtual environment:

    python3 -m venv /tmp/quant-venv
    /tmp/quant-venv/bin/pip install gguf==0.19.0 numpy
    /tmp/quant-venv/bin/python scripts/gen-quant-fixtures.py

For every type the script writes a few blocks and what gguf-py dequantizes
them to:

  * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (gguf-py has quantizers for these): random
    f32 inputs, gguf-py's quantized blocks and their dequantized values, so
    the C test checks both directions bit for bit.
  * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (gguf-py only dequantizes them): blocks of
    random bytes, so every quant, scale and min bit pattern occurs, with the
    f16 super-block scales replaced by chosen finite values (normal,
    subnormal, zero, negative, the largest half), and their dequantized
    values.

File layout (little-endian): "PWQF", u32 ggml type id, u32 block count,
u32 elements per block, u32 bytes per block, u32 has_input (0/1); then, if
has_input, count*elements f32 inputs; then count*bytes block bytes; then
count*elements f32 dequantized values.

The seed is fixed, so rerunning with the same gguf-py gives identical
files.
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "quant")

# (name, type, number of blocks, byte offsets of the f16 scales inside a block)
K_TYPES = [
    ("q2_K", T.Q2_K, [80, 82]),   # scales[16], qs[64], d, dmin
    ("q3_K", T.Q3_K, [108]),      # hmask[32], qs[64], scales[12], d
    ("q4_K", T.Q4_K, [0, 2]),     # d, dmin, scales[12], qs[128]
    ("q5_K", T.Q5_K, [0, 2]),     # d, dmin, scales[12], qh[32], qs[128]
    ("q6_K", T.Q6_K, [208]),      # ql[128], qh[64], scales[16] (int8), d
]
SMALL_TYPES = [
    ("q4_0", T.Q4_0),
    ("q4_1", T.Q4_1),
    ("q5_0", T.Q5_0),
    ("q5_1", T.Q5_1),
    ("q8_0", T.Q8_0),
]
# Chosen f16 scales for the K-quant blocks: ordinary, negative, subnormal,
# zero and the largest finite half.
SCALES = [0.0123, -0.0071, 6.0e-6, 0.0, 65504.0, 1.5, -0.25, 3.0e-3]


def write(name, qtype, blocks, values, inputs=None):
    block_elems, block_bytes = quants.GGML_QUANT_SIZES[qtype]
    n = blocks.shape[0]
    assert blocks.shape == (n, block_bytes) and blocks.dtype == np.uint8
    assert values.shape == (n, block_elems) and values.dtype == np.float32
    path = os.path.join(OUT, name + ".bin")
    with open(path, "wb") as f:
        f.write(b"PWQF")
        f.write(struct.pack("<5I", int(qtype), n, block_elems, block_bytes, inputs is not None))
        if inputs is not None:
            f.write(inputs.astype("<f4").tobytes())
        f.write(blocks.tobytes())
        f.write(values.astype("<f4").tobytes())
    print("wrote", os.path.relpath(path), n, "blocks")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261201)
    for name, qtype in SMALL_TYPES:
        block_elems, _ = quants.GGML_QUANT_SIZES[qtype]
        x = rng.standard_normal((6, block_elems)).astype(np.float32)
        x[1] *= 1e-3                       # small scales
        x[2] = np.abs(x[2]) + 0.5          # all positive
        x[3] = 0.0                         # a zero block
        x[4] *= 100.0                      # large values
        x[5, 7] = 40.0                     # one outlier
        blocks = quants.quantize(x, qtype)
        values = quants.dequantize(blocks, qtype)
        write(name, qtype, blocks, values, x)
    for name, qtype, scale_offsets in K_TYPES:
        block_elems, block_bytes = quants.GGML_QUANT_SIZES[qtype]
        n = len(SCALES)
        blocks = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
        for b in range(n):
            for k, off in enumerate(scale_offsets):
                # the second scale (dmin) of a block is another chosen value
                s = SCALES[(b + 3 * k) % n]
                blocks[b, off:off + 2] = np.frombuffer(np.float16(s).tobytes(), dtype=np.uint8)
        values = quants.dequantize(blocks, qtype)
        write(name, qtype, blocks, values)


if __name__ == "__main__":
    sys.exit(main())
