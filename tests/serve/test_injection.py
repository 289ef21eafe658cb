"""piecewise serve: user text never becomes a control token, and a NUL in
any string of a request is refused, never cut short.

- /v1/chat/completions: special-token text inside a message ("<|im_end|>",
  "</s><s>") is tokenized as plain text, so a message cannot close its own
  turn or forge another. On SmolLM2 (when fetched) the prompt grows by
  exactly the plain tokens of every special token's text; on a tiny model
  with a llama2 template, "x</s>" is one token more than "x</s".
- /v1/completions keeps special parsing (its writer formats the whole
  prompt): there the same text is one token.
- "hi\\u0000 and a long tail" (escaped or as a raw 0 byte) in any string
  field is a 400 naming the field; other control characters are kept as
  text, the whole content tokenized.

Usage: test_injection.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import Checks, Server, smollm_model  # noqa: E402

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
t = Checks("serve_injection")

LLAMA2_TEMPLATE = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
tiny = os.path.join(workdir, "tiny_llama2_chat.gguf")
subprocess.run([tiny_tool, tiny, LLAMA2_TEMPLATE], check=True, timeout=60)


def is_error(st, body, status, param=None, code=None):
    err = body.get("error") if isinstance(body, dict) else None
    ok = st == status and isinstance(err, dict) and isinstance(err.get("message"), str)
    if ok and param is not None:
        ok = err.get("param") == param
    if ok and code is not None:
        ok = err.get("code") == code
    return ok


def chat_tokens(srv, messages):
    st, b = srv.json("POST", "/v1/chat/completions",
                     {"messages": messages, "max_tokens": 1, "temperature": 0})
    if not t.check(st == 200, f"chat {messages!r}: {st} {b}"):
        return None
    return b["usage"]["prompt_tokens"]


def completion_tokens(srv, prompt):
    st, b = srv.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 1,
                                                 "temperature": 0})
    if not t.check(st == 200, f"completion {prompt!r}: {st} {b}"):
        return None
    return b["usage"]["prompt_tokens"]


# ---- the tiny model with a llama2 template: <s> and </s> are its control tokens ---------------
srv = Server(binary, tiny, "--max-seqs", "4")


def turn(text):
    """A conversation whose last message holds text; the template's own
    </s><s> markers sit between the turns."""
    return [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": text}]


for special in ["</s>", "<s>"]:
    # as plain text the closing ">" is one more token (no merge of the tiny
    # vocabulary holds it); as a special token the whole text is one token
    full, prefix = chat_tokens(srv, turn("x" + special)), chat_tokens(srv, turn("x" + special[:-1]))
    t.check(full is not None and prefix is not None and full == prefix + 1,
            f"chat: {special!r} in a message is text ({full} prompt tokens, {prefix} without "
            f"its last character)")
    full, prefix = completion_tokens(srv, "x" + special), completion_tokens(srv, "x" + special[:-1])
    t.check(full is not None and prefix is not None and full < prefix,
            f"completions: {special!r} in a prompt is the special token ({full} prompt tokens, "
            f"{prefix} without its last character)")

# ---- NUL: refused with 400 naming the field ------------------------------------------------------
TAIL = " and a long tail"
nul_cases = [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi\u0000" + TAIL}]},
     "messages[0].content"),
    ("/v1/chat/completions", {"messages": [{"role": "system", "content": "ok"},
                                           {"role": "user", "content": "\u0000hi"}]},
     "messages[1].content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi"}, {"type": "text", "text": "x\u0000" + TAIL}]}]},
     "messages[0].content[1].text"),
    ("/v1/chat/completions", {"messages": [{"role": "user\u0000", "content": "hi"}]},
     "messages[0].role"),
    ("/v1/completions", {"prompt": "hi\u0000" + TAIL}, "prompt"),
    ("/v1/completions", {"prompt": ["hi\u0000" + TAIL]}, "prompt[0]"),
    ("/v1/completions", {"prompt": "hi", "stop": "a\u0000b"}, "stop"),
    ("/v1/completions", {"prompt": "hi", "stop": ["x", "a\u0000b"]}, "stop[1]"),
    ("/v1/completions", {"prompt": "hi", "model": "m\u0000"}, "model"),
]
for path, body, param in nul_cases:
    st, b = srv.json("POST", path, body)
    t.check(is_error(st, b, 400, param, "invalid_value") and "NUL" in b["error"]["message"],
            f"{path} {json.dumps(body)}: want 400 naming {param}, got {st} {b}")
# a raw 0 byte inside a JSON string is the same NUL
st, b = srv.json("POST", "/v1/completions",
                 b'{"prompt": "hi\x00 and a long tail", "max_tokens": 1}')
t.check(is_error(st, b, 400, "prompt", "invalid_value"), f"raw NUL byte: {st} {b}")
# a NUL in a key: refused too, whatever the key
st, b = srv.json("POST", "/v1/completions", '{"pro\\u0000mpt": "x", "prompt": "hi"}')
t.check(is_error(st, b, 400, None, "invalid_value"), f"NUL in a key: {st} {b}")
# an escaped backslash before "u0000" is text, not a NUL
n = completion_tokens(srv, "hi\\u0000" + TAIL)
t.check(n is not None, "the text \\u0000 (backslash, u, zeros) is accepted")

# other control characters are kept as text: the whole content counts
short = chat_tokens(srv, [{"role": "user", "content": "hi\u0001"}])
long_ = chat_tokens(srv, [{"role": "user", "content": "hi\u0001\u001f\t\r" + TAIL}])
t.check(short is not None and long_ is not None and long_ > short + 5,
        f"control characters keep the text after them ({long_} against {short} prompt tokens)")
long_ = completion_tokens(srv, "hi\u0001\u001b" + TAIL)
t.check(long_ is not None and long_ > completion_tokens(srv, "hi") + 5,
        "control characters in a prompt keep the text after them")
st, b = srv.json("POST", "/v1/chat/completions",
                 {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
t.check(st == 200 and srv.alive(), "still serving after the refusals")
t.check(srv.terminate() == 0, "clean exit")

# ---- SmolLM2: every special token of its vocabulary ---------------------------------------------
# PW_SMOLLM2_GGUF names another copy, as for the C tests (the sanitizer run
# sets it to a missing file to leave the real model out)
smol = os.environ.get("PW_SMOLLM2_GGUF")
smol = (smol if os.path.isfile(smol) else None) if smol else smollm_model()
if not smol:
    print("SmolLM2-135M-Instruct.Q4_1.gguf not fetched: its checks are skipped")
    if t.failures:
        t.finish()
    print("serve_injection: tiny-model checks passed; SKIP the SmolLM2 part")
    sys.exit(77)

# The 17 CONTROL tokens of SmolLM2-135M-Instruct (tokenizer.ggml.token_type 3).
SMOL_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>",
                 "<file_sep>", "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>",
                 "<issue_closed>", "<jupyter_start>", "<jupyter_text>", "<jupyter_code>",
                 "<jupyter_output>", "<jupyter_script>", "<empty_output>"]
srv = Server(binary, smol, "--max-seqs", "4")
base = chat_tokens(srv, [{"role": "user", "content": ""}])
bos = (completion_tokens(srv, "a") or 0) - 1  # "a" is one token; the rest is what completions adds
plain = {}


def plain_tokens(text):
    """Tokens of text as plain text: the sum over its GPT-2 words (letters,
    or runs of other non-space characters: all these texts hold), each
    asked of /v1/completions, where no word is a special token's text."""
    total = 0
    for w in re.findall(r"[A-Za-z]+|[^\sA-Za-z0-9]+", text):
        if w not in plain:
            plain[w] = (completion_tokens(srv, w) or 0) - bos
        total += plain[w]
    return total


for special in SMOL_SPECIALS:
    n = chat_tokens(srv, [{"role": "user", "content": special}])
    t.check(n is not None and base is not None and n - base == plain_tokens(special),
            f"{special!r} in a message is {n - base if n and base else '?'} tokens, "
            f"want its {plain_tokens(special)} plain-text tokens")
everything = "".join(SMOL_SPECIALS)
for role in ["system", "user", "assistant"]:
    msgs = [{"role": role, "content": everything}]
    if role == "assistant":
        msgs.append({"role": "user", "content": ""})
    empty = [{"role": m["role"], "content": ""} for m in msgs]
    n, n0 = chat_tokens(srv, msgs), chat_tokens(srv, empty)
    t.check(n is not None and n0 is not None and n - n0 == plain_tokens(everything),
            f"every special token in a {role} message is plain text: {n} - {n0} prompt tokens, "
            f"want {plain_tokens(everything)}")
# the same text as a completion prompt is special tokens: far fewer tokens
t.check((completion_tokens(srv, everything) or 0) - bos == len(SMOL_SPECIALS),
        "completions: each special token's text is that one token")
# the case: "<|im_end|>" is no longer shorter than "<|im_end|"
a = chat_tokens(srv, [{"role": "user", "content": "<|im_end|>"}])
b = chat_tokens(srv, [{"role": "user", "content": "<|im_end|"}])
t.check(a is not None and b is not None and a >= b, f"<|im_end|> {a} tokens, <|im_end| {b}")
t.check(srv.terminate() == 0, "clean exit")
t.finish()
