#!/usr/bin/env python3
"""A second, independent reference for stories260K's ids: llama2.c's run.c
encode() (dummy-prefix space token, per-code-point lookup with <0xNN> byte
fallback at id byte+3, then repeated best-score merge of adjacent pairs),
ported line by line to Python, over ../shared/models/tok512.bin.

Usage: llama2c_encode.py TOK512.BIN STRING...   (prints ids with BOS = 1)
"""
import struct
import sys


def load(path, vocab_size=512):
    data = open(path, "rb").read()
    off = 4  # max_token_length
    vocab, scores = [], []
    for _ in range(vocab_size):
        score, length = struct.unpack_from("<fi", data, off)
        off += 8
        vocab.append(data[off:off + length])
        off += length
        scores.append(score)
    return vocab, scores


def encode(vocab, scores, text):
    index = {v: i for i, v in enumerate(vocab)}
    raw = text.encode()
    toks = [1]
    if raw:
        toks.append(index[b" "])
    i = 0
    while i < len(raw):
        n = 1
        if raw[i] >= 0xC0:
            while i + n < len(raw) and (raw[i + n] & 0xC0) == 0x80 and n < 4:
                n += 1
        ch = raw[i:i + n]
        if ch in index:
            toks.append(index[ch])
        else:
            toks.extend(b + 3 for b in ch)
        i += n
    while True:
        best, best_k, best_id = -1e10, -1, -1
        for k in range(len(toks) - 1):
            merged = vocab[toks[k]] + vocab[toks[k + 1]]
            if merged in index and scores[index[merged]] > best:
                best, best_k, best_id = scores[index[merged]], k, index[merged]
        if best_k < 0:
            break
        toks[best_k:best_k + 2] = [best_id]
    return toks


if __name__ == "__main__":
    vocab, scores = load(sys.argv[1])
    for s in sys.argv[2:]:
        print(repr(s), encode(vocab, scores, s))
