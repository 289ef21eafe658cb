#!/usr/bin/env python3
"""Reference token ids and greedy continuations from llama.cpp, for
tests/model/test_llamacpp_reference.c.

    scripts/llamacpp-reference.py MODEL.gguf [--out DIR] [--server PATH]

Starts the llama-server that `bench/peers/llamacpp.sh build` builds (from the
llama-cpp-python sdist, version $LLAMACPP_PY_VERSION, default 0.3.36, into
$PW_LLAMACPP_CACHE or ~/.cache/piecewise/llamacpp) on MODEL with one thread,
one slot and a free port on 127.0.0.1, waits for /health, and asks it for
what follows. Without --server it tries the native, noamx and portable
builds in that order, taking the first that comes up healthy, and records
which one ran and the CPU's model and vector flags (llama_cpp.build,
llama_cpp.cpu): llama.cpp's AVX2 and AVX-512 builds of one version give
different continuations (BENCHMARKS.md, "Correctness against llama.cpp";
scripts/llamacpp-reference-diff.py compares two files).

  tokenize  /tokenize of a fixed list of strings (ASCII, Unicode, runs of
            whitespace, emoji, code, digits, and a chat turn rendered by the
            model's own template through /apply-template, or by the
            architecture's turn format where the file has no template, as
            Gemma 3 270M's has not), each with
            (add_special, parse_special) = (true, true), (false, true) and
            (false, false). add_special adds BOS only where the model asks
            for it (tokenizer.ggml.add_bos_token), as llama.cpp does.
  greedy    /completion of several prompts, 32 tokens each, sent as token-id
            arrays (the prompt's ids from /tokenize with add_special, so BOS
            is there exactly when the model wants one), so that the
            comparison tests the model and not the tokenizer. Sampling is
            greedy: samplers ["top_k"], top_k 1, temperature 0, no
            penalties, no prompt cache; generation stops early only at an
            end-of-generation token.

Margins: with n_probs 2 and post_sampling_probs false, llama-server (this
version: tools/server/server-context.cpp populate_token_probs and
server-common.cpp get_token_probabilities) reports for each generated token
the two most likely tokens of the RAW distribution, before any sampler ran:
the logits are sorted, softmaxed over the whole vocabulary, and returned as
natural-log probabilities ("top_logprobs", "logprob" = ln p). The softmax's
normaliser cancels, so margin = logprob(top 1) - logprob(top 2) is the
top-2 logit difference, up to float32 rounding (about 1e-6 here). The test
compares piecewise's greedy tokens with these up to the first step whose
margin is below 0.02, where either answer is right.

Writes DIR/<model stem>.json (DIR: tests/data/llamacpp): the model's file
name and sha256, the llama.cpp version, how it was made, `tokenize: [{text,
add_special, parse_special, ids}]` and `greedy: [{prompt, prompt_ids,
tokens, margins, top2}]`. Token ids are not model weights; the json may be
committed, the model never. Python 3 standard library only.
"""
import argparse
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

VERSION = os.environ.get("LLAMACPP_PY_VERSION", "0.3.36")
CACHE = os.path.join(
    os.environ.get("PW_LLAMACPP_CACHE", os.path.expanduser("~/.cache/piecewise/llamacpp")), VERSION
)
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GREEDY_TOKENS = 32
NEAR_TIE = 0.02

# Strings for /tokenize. The chat turn is added per model (its template).
TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "",
    " leading space",
    "trailing spaces   ",
    "multiple   spaces\tand\ttabs\n\nand newlines\n",
    "   ",
    "\n\n\n",
    "Grüße aus Köln: café, naïve, façade, Øresund",
    "日本語のテキストと中文文本",
    "Привет, мир! Ελληνικά αβγ",
    "مرحبا بالعالم नमस्ते दुनिया",
    "I love 🍕 and 🚀! 👍🏽 👨\u200d👩\u200d👧\u200d👦",
    "def f(x):\n    return x**2 + 1  # square\n",
    "int main(void) { printf(\"%d\\n\", a[i] >> 2); return 0; }",
    "1234567890 3.14159 1,000,000 2026-12-01 0x1F",
    "don't you'll I'M we've they'd",
    "<b>bold</b> &amp; <i>italics</i>",
]
TOKENIZE_VARIANTS = [(True, True), (False, True), (False, False)]

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):\n",
    "1, 2, 3, 4, 5,",
    "The three primary colors are",
    "In 1969, the first humans landed on",
    "Water boils at a temperature of",
]
CHAT_QUESTION = "What is the capital of France? Answer in one sentence."


def log(msg):
    print(f"[llamacpp-reference] {msg}", file=sys.stderr, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# The peer builds in the order tried: a build that dies before it is healthy
# (the native one is killed by SIGILL on a VM that lists AMX and refuses it)
# gives way to the next. Two builds do not give the same bits (their vector
# widths order the f16 dot products of attention differently), so the file
# records which one ran, and on what CPU.
FLAVOURS = ("native", "noamx", "portable")
CPU_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "avx_vnni", "amx_tile", "amx_int8")


def find_servers(explicit):
    if explicit:
        return [explicit]
    found = [p for p in (os.path.join(CACHE, f, "llama-server") for f in FLAVOURS)
             if os.access(p, os.X_OK)]
    if not found:
        sys.exit(f"no llama-server under {CACHE}: run bench/peers/llamacpp.sh build")
    return found


def cpu_description():
    model, flags = "unknown CPU", []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    have = set(value.split())
                    flags = [x for x in CPU_FLAGS if x in have]
    except OSError:
        pass
    return {"model": model, "flags": flags}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, ctx):
        self.port = free_port()
        self.args = [binary, "-m", model, "-t", "1", "-tb", "1", "-np", "1", "-c", str(ctx),
                     "--host", "127.0.0.1", "--port", str(self.port), "--no-webui",
                     "--no-warmup", "--no-cache-prompt"]
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
        log("starting " + " ".join(self.args))
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_healthy(self, timeout=300):
        """True once /health answers; False when the server died first."""
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                log(f"llama-server exited with {self.proc.returncode} before it was healthy "
                    f"(log: {self.log.name})")
                return False
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=5) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.5)
        sys.exit(f"llama-server not healthy after {timeout} s; see {self.log.name}")

    def post(self, path, body):
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            sys.exit(f"{path}: HTTP {e.code}: {e.read().decode(errors='replace')}")

    def get(self, path):
        with urllib.request.urlopen(self.url(path), timeout=60) as r:
            return json.load(r)

    def stop(self, keep_log=False):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        if not keep_log:
            os.unlink(self.log.name)


def tokenize(server, text, add_special, parse_special):
    r = server.post("/tokenize", {"content": text, "add_special": add_special,
                                  "parse_special": parse_special})
    return r["tokens"]


def gguf_metadata(path, wanted):
    """The string values of the keys in `wanted` from a GGUF header (the
    other values are skipped)."""
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
              12: "d"}
    found = {}
    with open(path, "rb") as f:
        def read(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def string():
            return f.read(read("Q"))

        def skip(vtype):
            if vtype == 8:
                string()
            elif vtype == 9:
                etype, n = read("I"), read("Q")
                if etype in scalar:
                    f.seek(n * struct.calcsize(scalar[etype]), 1)
                else:
                    for _ in range(n):
                        skip(etype)
            else:
                f.seek(struct.calcsize(scalar[vtype]), 1)

        if f.read(4) != b"GGUF":
            sys.exit(f"{path} is not a GGUF file")
        read("I")  # version
        read("Q")  # tensors
        for _ in range(read("Q")):
            key, vtype = string().decode(), read("I")
            if key in wanted and vtype == 8:
                found[key] = string().decode()
            else:
                skip(vtype)
    return found


# The Gemma 3 turn format (Google's model card: "<start_of_turn>user ...
# <end_of_turn> <start_of_turn>model"), for GGUF files that carry no
# tokenizer.chat_template (gemma-3-270m-q4_k_m.gguf has none, and
# llama-server would fall back to chatml, which this model never saw).
BUILTIN_TURNS = {
    "gemma3": "<bos><start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n",
}


def chat_turn(server, meta):
    """One user message with the assistant's turn opened: the model's own
    template (llama-server's jinja engine), or the architecture's turn
    format when the file has no template."""
    if "tokenizer.chat_template" not in meta:
        arch = meta.get("general.architecture", "")
        if arch not in BUILTIN_TURNS:
            sys.exit(f"the model has no tokenizer.chat_template and no turn format for {arch!r}")
        return BUILTIN_TURNS[arch].format(q=CHAT_QUESTION)
    r = server.post("/apply-template", {"messages": [{"role": "user", "content": CHAT_QUESTION}],
                                        "add_generation_prompt": True})
    return r["prompt"]


def greedy(server, prompt_ids):
    body = {
        "prompt": prompt_ids,
        "n_predict": GREEDY_TOKENS,
        "samplers": ["top_k"],
        "top_k": 1,
        "temperature": 0.0,
        "repeat_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "dry_multiplier": 0.0,
        "n_probs": 2,
        "post_sampling_probs": False,
        "cache_prompt": False,
        "return_tokens": True,
        "seed": 1,
    }
    r = server.post("/completion", body)
    steps = r["completion_probabilities"]
    tokens = [s["id"] for s in steps]
    if r.get("tokens") is not None and r["tokens"] != tokens:
        sys.exit(f"tokens {r['tokens']} differ from completion_probabilities ids {tokens}")
    margins, top2 = [], []
    for s in steps:
        top = s["top_logprobs"]
        if len(top) < 2:
            sys.exit(f"step with fewer than 2 top_logprobs: {s}")
        # greedy picks the raw argmax unless a logit bias (the model's
        # suppress tokens) moved it: then this reference cannot be used.
        if top[0]["id"] != s["id"]:
            sys.exit(f"sampled token {s['id']} is not the raw top-1 {top[0]['id']}")
        margins.append(round(top[0]["logprob"] - top[1]["logprob"], 6))
        top2.append([top[0]["id"], top[1]["id"]])
    return tokens, margins, top2, r.get("stop_type", "")


def server_version(binary):
    r = subprocess.run([binary, "--version"], capture_output=True, text=True)
    out = r.stdout + r.stderr
    for line in out.splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--out", default=os.path.join(HERE, "tests", "data", "llamacpp"))
    ap.add_argument("--server", help="llama-server binary (default: the peer build)")
    a = ap.parse_args()
    if not os.path.isfile(a.model):
        sys.exit(f"no model file {a.model}")
    stem = os.path.basename(a.model)
    stem = stem[:-5] if stem.endswith(".gguf") else stem
    ctx = 1024
    for binary in find_servers(a.server):
        server = Server(binary, a.model, ctx)
        if server.wait_healthy():
            break
        server.stop(keep_log=True)
    else:
        sys.exit("no llama-server build ran the model (see the logs above)")
    try:
        props = server.get("/props")
        meta = gguf_metadata(a.model, {"general.architecture", "tokenizer.chat_template"})
        chat = chat_turn(server, meta)
        tok = []
        for text in TEXTS + [chat]:
            for add_special, parse_special in TOKENIZE_VARIANTS:
                tok.append({"text": text, "add_special": add_special,
                            "parse_special": parse_special,
                            "ids": tokenize(server, text, add_special, parse_special)})
        runs = []
        for prompt in PROMPTS + [chat]:
            # the rendered chat turn carries its own BOS text where the
            # template writes one (Gemma's "<bos>"); llama.cpp would add a
            # second with add_special, so it is tokenized without.
            bos_text = props.get("bos_token", "")
            add_special = not (bos_text and prompt.startswith(bos_text))
            ids = tokenize(server, prompt, add_special, True)
            tokens, margins, top2, stop = greedy(server, ids)
            log(f"{prompt[:40]!r}: {len(ids)} prompt ids, {len(tokens)} tokens "
                f"({stop}), min margin {min(margins):.4f}")
            runs.append({"prompt": prompt, "prompt_ids": ids, "tokens": tokens,
                         "margins": margins, "top2": top2, "stop": stop})
    finally:
        server.stop()
    doc = {
        "model": os.path.basename(a.model),
        "model_sha256": sha256(a.model),
        "llama_cpp": {"llama_cpp_python_sdist": VERSION, "server_version": server_version(binary),
                      "build": os.path.basename(os.path.dirname(os.path.abspath(binary))),
                      "cpu": cpu_description()},
        "how_made": (
            "scripts/llamacpp-reference.py: llama-server from the llama-cpp-python "
            f"{VERSION} sdist (bench/peers/llamacpp.sh build), run as '"
            + " ".join([os.path.basename(binary)] + server.args[1:])
            .replace(a.model, os.path.basename(a.model))
            .replace(f"--port {server.port}", "--port <a free port>")
            + "'. tokenize: POST /tokenize {content, add_special, parse_special}; add_special "
            "adds BOS only where the model's add_bos_token asks. greedy: POST /completion with "
            "prompt = prompt_ids (token ids, from /tokenize with add_special, parse_special), "
            f"n_predict {GREEDY_TOKENS}, samplers [top_k], top_k 1, temperature 0, no penalties, "
            "cache_prompt false, n_probs 2, post_sampling_probs false; generation stops early "
            "only at an end-of-generation token. margins[i] = logprob(top 1) - logprob(top 2) "
            "at step i: llama-server's pre-sampling probabilities are the softmax of the raw "
            "logits over the whole vocabulary, so this is the top-2 logit difference (float32 "
            "rounding aside). top2[i] = [top 1 id, top 2 id]; tokens[i] == top2[i][0]. A step "
            f"whose margin is below {NEAR_TIE} is a near-tie; "
            "tests/model/test_llamacpp_reference.c says at which bound it compares, and why."),
        "near_tie_margin": NEAR_TIE,
        "chat_turn": ("the model's tokenizer.chat_template via /apply-template"
                      if "tokenizer.chat_template" in meta else
                      f"no template in the file: the {meta.get('general.architecture')} turn "
                      "format written out in scripts/llamacpp-reference.py"),
        "bos_token": props.get("bos_token"),
        "eos_token": props.get("eos_token"),
        "tokenize": tok,
        "greedy": runs,
    }
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, stem + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
