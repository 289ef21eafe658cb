#!/usr/bin/env python3
"""The float64 forward: the reference the golden tests compare against.

    float64-forward.py reference MODEL.gguf --prompts PROMPTS --steps N --out REF
    float64-forward.py logits MODEL.gguf --ids 1,2,3 [--top K]

Reads a GGUF (its own small reader; the `gguf` package from PyPI
dequantizes: every stored type into float32 values, exactly the values the
file encodes) and
runs the forward pass with float64 activations and float64 products: no
activation is rounded to 8 or 16 bits, no sum is kept in float32. What it
implements follows llama.cpp's graphs for the architectures piecewise runs:

  llama   rms_norm, q/k/v, rope in ggml's "normal" mode (adjacent pairs, the
          layout llama.cpp's converter writes), with rope_freqs.weight as
          frequency divisors when present (Llama 3.x `llama3` scaling) and
          rope.scaling.type linear as a position factor; causal attention
          scaled by 1/sqrt(head_dim); silu(gate) * up; tied or separate head.
  qwen2   llama with biases on q, k and v and NeoX rope (pairs i, i + hd/2).
  qwen3   llama with per-head RMS norm of q and k before NeoX rope and a head
          size from attention.key_length.
  phi3    llama with NeoX rope, a fused attn_qkv weight (q rows, then k, then
          v) or separate ones, and a fused ffn_up (gate rows, then up rows).
          Its sliding_window key is read and not used, as llama.cpp does.
  gemma3  embeddings times sqrt(dim), per-head q/k norm, NeoX rope with the
          local base on sliding-window layers (every sixth layer global),
          post-attention and post-ffw norms, gelu_tanh(gate) * up, optional
          final logit soft-capping.

`reference` runs greedy decoding from each prompt (one line of token ids per
prompt in PROMPTS) for N steps and writes REF, a small text file: per step
the chosen token and the top-2 logit margin (the golden tests compare an
engine's greedy tokens with these up to the first margin below 0.5). Token
ids and margins, never weights. `logits` prints the last position's top-K
logits, to check the forward against an engine's logits.

Memory: every dequantized weight is kept as float64 (8 bytes a parameter:
about 2.2 GB for Gemma 3 270M)."""
import argparse
import hashlib
import math
import os
import struct
import sys

import numpy as np

try:
    import gguf
    from gguf.quants import dequantize
except ImportError:  # pragma: no cover
    sys.stderr.write("float64-forward.py needs the gguf and numpy packages "
                     "(scripts/float64-venv.sh makes a venv with them)\n")
    sys.exit(2)


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}


def read_gguf(path):
    """The metadata (arrays of more than 64 entries, the vocabulary, are
    skipped: the forward needs none) and the tensors of a GGUF file, whose
    data stay in a read-only memory map. gguf's own reader builds every
    vocabulary entry as an object, which takes minutes for a 262k vocabulary;
    this walks past them."""
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    buf = memoryview(mm)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        v = bytes(buf[pos:pos + n]).decode("utf-8", "replace")
        pos += n
        return v

    def value(t):
        nonlocal pos
        if t in _SCALARS:
            return take(_SCALARS[t])
        if t == 8:
            return string()
        if t != 9:
            raise SystemExit(f"{path}: unknown metadata type {t}")
        et, n = take("<I"), take("<Q")
        if et in _SCALARS and n > 64:  # skip numbers in one step
            pos += n * struct.calcsize(_SCALARS[et])
            return None
        items = [value(et) for _ in range(n)]
        return items if n <= 64 else None

    if bytes(buf[0:4]) != b"GGUF":
        raise SystemExit(f"{path}: not a GGUF file")
    pos = 4
    take("<I")
    n_tensors, n_kv = take("<Q"), take("<Q")
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        infos.append((name, dims, take("<I"), take("<Q")))
    align = kv.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, dims, qtype, offset in infos:
        qt = gguf.GGMLQuantizationType(qtype)
        block, size = gguf.GGML_QUANT_SIZES[qt]
        row_bytes = dims[0] // block * size
        rows = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        data = mm[base + offset: base + offset + rows * row_bytes].reshape(rows, row_bytes)
        tensors[name] = (dims, qt, data)
    return kv, tensors


class Model:
    def __init__(self, path):
        self.cache = {}
        self.kv, self.tensors = read_gguf(path)
        self.arch = self.kv["general.architecture"]
        a = self.arch
        if a not in ("llama", "qwen2", "qwen3", "phi3", "gemma3"):
            raise SystemExit(f"architecture {a} is not implemented here")
        self.n_layers = int(self.kv[f"{a}.block_count"])
        self.dim = int(self.kv[f"{a}.embedding_length"])
        self.n_heads = int(self.kv[f"{a}.attention.head_count"])
        self.n_kv = int(self.kv.get(f"{a}.attention.head_count_kv", self.n_heads))
        self.head_dim = int(self.kv.get(f"{a}.attention.key_length", self.dim // self.n_heads))
        self.eps = float(self.kv.get(f"{a}.attention.layer_norm_rms_epsilon", 1e-5))
        self.n_rot = int(self.kv.get(f"{a}.rope.dimension_count", self.head_dim))
        if self.n_rot != self.head_dim:
            raise SystemExit("partial rotary embeddings are not implemented here")
        self.theta = float(self.kv.get(f"{a}.rope.freq_base", 10000.0))
        scaling = self.kv.get(f"{a}.rope.scaling.type", "none")
        self.freq_scale = 1.0
        if scaling == "linear":
            self.freq_scale = 1.0 / float(self.kv[f"{a}.rope.scaling.factor"])
        elif scaling not in ("none",):
            raise SystemExit(f"rope scaling {scaling} is not implemented here")
        if "rope_factors_long.weight" in self.tensors or "blk.0.rope_factors_long.weight" in self.tensors:
            raise SystemExit("longrope factors are not implemented here")
        self.neox = a != "llama"
        self.freq_factors = None
        if "rope_freqs.weight" in self.tensors:
            self.freq_factors = self.weight("rope_freqs.weight")
        self.softcap = float(self.kv.get(f"{a}.final_logit_softcapping", 0.0))
        self.attn_scale = 1.0 / math.sqrt(self.head_dim)
        self.window = [0] * self.n_layers
        self.layer_theta = [self.theta] * self.n_layers
        if a == "gemma3":
            if self.n_layers == 62:
                self.attn_scale = 1.0 / math.sqrt(self.dim / self.n_heads)
            w = int(self.kv.get("gemma3.attention.sliding_window", 0))
            period = int(self.kv.get("gemma3.attention.sliding_window_pattern", 6))
            local = float(self.kv.get("gemma3.rope.freq_base_swa",
                                      self.kv.get("gemma3.rope.local.freq_base", 10000.0)))
            for l in range(self.n_layers):
                if w > 0 and l % period < period - 1:
                    self.window[l] = w
                    self.layer_theta[l] = local

    def weight(self, name):
        """The tensor as float64 in numpy order (rows = ggml dims[1])."""
        if name in self.cache:
            return self.cache[name]
        dims, qtype, data = self.tensors[name]
        v = dequantize(data, qtype).astype(np.float32, copy=False)
        v = v.reshape([int(d) for d in reversed(dims)]).astype(np.float64)
        self.cache[name] = v
        return v

    def has(self, name):
        return name in self.tensors

    def vec(self, name):
        return self.weight(name)


def matmul_t(x, w):
    """x (T, k) times w (n, k)^T, in float64."""
    return x @ w.T


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, m, theta, n_heads):
    """x (T, n_heads*hd) rotated in place of a copy; pos (T,)."""
    hd = m.head_dim
    x = x.reshape(len(pos), n_heads, hd).copy()
    i = np.arange(hd // 2, dtype=np.float64)
    inv = theta ** (-2.0 * i / hd)
    if m.freq_factors is not None:
        inv = inv / m.freq_factors
    ang = m.freq_scale * np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    c = np.cos(ang)[:, None, :]
    s = np.sin(ang)[:, None, :]
    if m.neox:
        a, b = x[..., : hd // 2].copy(), x[..., hd // 2:].copy()
        x[..., : hd // 2] = a * c - b * s
        x[..., hd // 2:] = a * s + b * c
    else:
        a, b = x[..., 0::2].copy(), x[..., 1::2].copy()
        x[..., 0::2] = a * c - b * s
        x[..., 1::2] = a * s + b * c
    return x.reshape(len(pos), n_heads * hd)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


class State:
    """The KV cache of one sequence, float64."""

    def __init__(self, m):
        self.k = [np.zeros((0, m.n_kv * m.head_dim)) for _ in range(m.n_layers)]
        self.v = [np.zeros((0, m.n_kv * m.head_dim)) for _ in range(m.n_layers)]
        self.n = 0


def qkv(m, l, x):
    p = f"blk.{l}."
    qd, kd = m.n_heads * m.head_dim, m.n_kv * m.head_dim
    if m.has(p + "attn_qkv.weight"):
        fused = matmul_t(x, m.weight(p + "attn_qkv.weight"))
        q, k, v = fused[:, :qd], fused[:, qd:qd + kd], fused[:, qd + kd:]
    else:
        q = matmul_t(x, m.weight(p + "attn_q.weight"))
        k = matmul_t(x, m.weight(p + "attn_k.weight"))
        v = matmul_t(x, m.weight(p + "attn_v.weight"))
    for name, t in (("attn_q", q), ("attn_k", k), ("attn_v", v)):
        if m.has(p + name + ".bias"):
            t += m.vec(p + name + ".bias")
    if m.has(p + "attn_q_norm.weight"):
        T = x.shape[0]
        q = rms_norm(q.reshape(T, m.n_heads, m.head_dim), m.vec(p + "attn_q_norm.weight"),
                     m.eps).reshape(T, qd)
        k = rms_norm(k.reshape(T, m.n_kv, m.head_dim), m.vec(p + "attn_k_norm.weight"),
                     m.eps).reshape(T, kd)
    return q, k, v


def attention(m, l, q, st, pos):
    """q (T, H*hd) of one sequence at positions pos, against its cache st."""
    T = q.shape[0]
    hd, group = m.head_dim, m.n_heads // m.n_kv
    K, V = st.k[l], st.v[l]
    kpos = np.arange(K.shape[0])
    out = np.empty((T, m.n_heads * hd))
    for t in range(T):
        allowed = kpos <= pos[t]
        if m.window[l] > 0:
            allowed &= pos[t] - kpos < m.window[l]
        for h in range(m.n_heads):
            kv = h // group
            kh = K[allowed, kv * hd:(kv + 1) * hd]
            vh = V[allowed, kv * hd:(kv + 1) * hd]
            s = kh @ q[t, h * hd:(h + 1) * hd] * m.attn_scale
            s = np.exp(s - s.max())
            out[t, h * hd:(h + 1) * hd] = (s / s.sum()) @ vh
    return out


def ffn(m, l, x):
    p = f"blk.{l}."
    if m.has(p + "ffn_gate.weight"):
        g = matmul_t(x, m.weight(p + "ffn_gate.weight"))
        u = matmul_t(x, m.weight(p + "ffn_up.weight"))
    else:  # phi3: gate rows then up rows in ffn_up
        gu = matmul_t(x, m.weight(p + "ffn_up.weight"))
        half = gu.shape[1] // 2
        g, u = gu[:, :half], gu[:, half:]
    act = gelu_tanh(g) if m.arch == "gemma3" else silu(g)
    return matmul_t(act * u, m.weight(p + "ffn_down.weight"))


def forward(m, states, seqs):
    """Appends seqs[i] to sequence states[i], all sequences in one batch (each
    weight read once per step; rows never mix); returns each sequence's last
    position's logits (float64)."""
    spans, ids, pos = [], [], []
    for st, toks in zip(states, seqs):
        spans.append((len(ids), len(ids) + len(toks)))
        ids.extend(toks)
        pos.extend(range(st.n, st.n + len(toks)))
    pos = np.asarray(pos)
    emb = m.weight("token_embd.weight")
    h = emb[np.asarray(ids)].copy()
    if m.arch == "gemma3":
        h = h * math.sqrt(m.dim)
    for l in range(m.n_layers):
        p = f"blk.{l}."
        x = rms_norm(h, m.vec(p + "attn_norm.weight"), m.eps)
        q, k, v = qkv(m, l, x)
        q = rope(q, pos, m, m.layer_theta[l], m.n_heads)
        k = rope(k, pos, m, m.layer_theta[l], m.n_kv)
        att = np.empty_like(q)
        for st, (a, b) in zip(states, spans):
            st.k[l] = np.concatenate([st.k[l], k[a:b]])
            st.v[l] = np.concatenate([st.v[l], v[a:b]])
            att[a:b] = attention(m, l, q[a:b], st, pos[a:b])
        a = matmul_t(att, m.weight(p + "attn_output.weight"))
        if m.arch == "gemma3":
            a = rms_norm(a, m.vec(p + "post_attention_norm.weight"), m.eps)
        h = h + a
        f = ffn(m, l, rms_norm(h, m.vec(p + "ffn_norm.weight"), m.eps))
        if m.arch == "gemma3":
            f = rms_norm(f, m.vec(p + "post_ffw_norm.weight"), m.eps)
        h = h + f
    for st, toks in zip(states, seqs):
        st.n += len(toks)
    last = [b - 1 for _, b in spans]
    x = rms_norm(h[last], m.vec("output_norm.weight"), m.eps)
    head = m.weight("output.weight") if m.has("output.weight") else emb
    logits = matmul_t(x, head)
    if m.softcap > 0:
        logits = m.softcap * np.tanh(logits / m.softcap)
    return list(logits)


def top2(logits):
    i = np.argpartition(-logits, 1)[:2]
    i = i[np.argsort(-logits[i], kind="stable")]
    # ties: the lower id first, as the engines' argmax picks it
    if logits[i[0]] == logits[i[1]] and i[1] < i[0]:
        i = i[::-1]
    return int(i[0]), int(i[1]), float(logits[i[0]] - logits[i[1]])


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cmd_reference(args):
    m = Model(args.model)
    prompts = []
    with open(args.prompts) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                prompts.append([int(t) for t in line.replace(",", " ").split()])
    eog = {m.kv.get("tokenizer.ggml.eos_token_id")}
    out = [f"# float64 greedy reference (scripts/float64-forward.py reference)",
           f"model {os.path.basename(args.model)}",
           f"sha256 {sha256(args.model)}",
           *([f"synth {args.synth[0]} {args.synth[1]}"] if args.synth else []),
           f"prompts {len(prompts)}"]
    # all prompts decode together, one token each per step, until each
    # has its steps or has ended
    states = [State(m) for _ in prompts]
    logits = forward(m, states, prompts)
    steps = [[] for _ in prompts]
    active = list(range(len(prompts)))
    while active:
        feed = []
        for i in active:
            a, b, margin = top2(logits[i])
            steps[i].append((a, b, margin))
            if a not in eog and len(steps[i]) < args.steps:
                feed.append((i, a))
        active = [i for i, _ in feed]
        if active:
            out_logits = forward(m, [states[i] for i in active], [[a] for _, a in feed])
            for i, lg in zip(active, out_logits):
                logits[i] = lg
        sys.stderr.write(".")
    sys.stderr.write("\n")
    for ids, st in zip(prompts, steps):
        out.append("prompt %d %s" % (len(ids), " ".join(map(str, ids))))
        out.append("steps %d" % len(st))
        for a, b, margin in st:
            out.append("%d %d %.6f" % (a, b, margin))
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


def cmd_logits(args):
    m = Model(args.model)
    ids = [int(t) for t in args.ids.replace(",", " ").split()]
    logits = forward(m, [State(m)], [ids])[0]
    order = np.argsort(-logits, kind="stable")[: args.top]
    for i in order:
        print("%d %.9f" % (i, logits[i]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reference")
    r.add_argument("model")
    r.add_argument("--prompts", required=True)
    r.add_argument("--steps", type=int, default=48)
    r.add_argument("--out", required=True)
    r.add_argument("--synth", nargs=2, metavar=("FAMILY", "VOCAB"),
                   help="record that MODEL is the synthetic FAMILY file made from the "
                        "vocabulary VOCAB (a file name in llama.cpp's models/ folder)")
    g = sub.add_parser("logits")
    g.add_argument("model")
    g.add_argument("--ids", required=True)
    g.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    {"reference": cmd_reference, "logits": cmd_logits}[args.cmd](args)


if __name__ == "__main__":
    main()
