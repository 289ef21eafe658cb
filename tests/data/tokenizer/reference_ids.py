#!/usr/bin/env python3
"""Prints the reference token ids used by tests/model/test_tokenizer*.c.

Two independent implementations, each rebuilt from the vocabulary stored in
the GGUF file itself (so no hub download is needed):

  spm  <stories260K.gguf>          SentencePiece (pip install sentencepiece
                                   protobuf gguf): a BPE ModelProto with the
                                   GGUF's pieces, scores and types,
                                   byte_fallback, add_dummy_prefix, identity
                                   normalization -- llama.cpp's SPM settings.
  bpe  <SmolLM2-...gguf>           Hugging Face tokenizers (pip install
                                   tokenizers gguf): BPE over the GGUF's
                                   tokens and merges, pre-tokenizer
                                   Sequence[Digits(individual), ByteLevel(no
                                   prefix space)] as in SmolLM2's
                                   tokenizer.json, control tokens added as
                                   special tokens.

Usage: reference_ids.py spm|bpe FILE.gguf STRING...
"""
import sys

import gguf


def gguf_array(reader, key, conv):
    field = reader.fields[key]
    return [conv(field.parts[i]) for i in field.data]


def spm_encoder(reader):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    toks = gguf_array(reader, "tokenizer.ggml.tokens", lambda p: bytes(p).decode())
    scores = gguf_array(reader, "tokenizer.ggml.scores", lambda p: float(p[0]))
    types = gguf_array(reader, "tokenizer.ggml.token_type", lambda p: int(p[0]))
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.vocab_size = len(toks)
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    kinds = pb.ModelProto.SentencePiece
    type_map = {1: kinds.NORMAL, 2: kinds.UNKNOWN, 3: kinds.CONTROL,
                4: kinds.USER_DEFINED, 5: kinds.UNUSED, 6: kinds.BYTE}
    for t, s, ty in zip(toks, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = t, s, type_map[ty]
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    return sp.encode


def bpe_encoder(reader):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    toks = gguf_array(reader, "tokenizer.ggml.tokens", lambda p: bytes(p).decode())
    types = gguf_array(reader, "tokenizer.ggml.token_type", lambda p: int(p[0]))
    merges = gguf_array(reader, "tokenizer.ggml.merges", lambda p: tuple(bytes(p).decode().split(" ")))
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(toks)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([t for t, ty in zip(toks, types) if ty == 3])
    return lambda s: tok.encode(s, add_special_tokens=False).ids


def main():
    kind, path, strings = sys.argv[1], sys.argv[2], sys.argv[3:]
    reader = gguf.GGUFReader(path)
    encode = spm_encoder(reader) if kind == "spm" else bpe_encoder(reader)
    for s in strings:
        print(repr(s), encode(s))


if __name__ == "__main__":
    main()
