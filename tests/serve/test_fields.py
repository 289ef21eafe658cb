"""piecewise serve: the OpenAI fields beyond the basics and the token
endpoints, against a real server (standard library only).

- logprobs / top_logprobs: OpenAI's shapes for chat and completions,
  streamed and not; the streamed ones join into the plain answer's; they are
  the same bits alone and under concurrent load.
- seed: the same seeded request gives the same text again, while other
  clients run, and after a restart; no seed stays random.
- logit_bias forces and bans tokens; presence/frequency penalties of 0
  change nothing.
- every new field refuses a wrong type, a value out of range and too many
  entries with 400 naming the field.
- POST /tokenize and /detokenize round-trip, with pieces, specials only on
  request; bad input is 400 naming the field.
- the chat page at / is served with a strict Content-Security-Policy, open
  even with --api-key.
Usage: test_fields.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import Checks, Server, sse_events  # noqa: E402

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
t = Checks("serve_fields")

# A tiny random model with a llama2 chat template: chat and completions both
# work on it, in every build.
TEMPLATE = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
model = os.path.join(workdir, "tiny_chat.gguf")
subprocess.run([tiny_tool, model, TEMPLATE], check=True, timeout=60)
KEY = "k-fields"
AUTH = {"Authorization": f"Bearer {KEY}"}
srv = Server(binary, model, "--max-seqs", "8", "--api-key", KEY)


def post(path, body, headers=AUTH):
    return srv.json("POST", path, body, headers)


def is_error(st, body, status, param=None, code="invalid_value"):
    err = body.get("error") if isinstance(body, dict) else None
    ok = st == status and isinstance(err, dict) and isinstance(err.get("message"), str)
    if ok and param is not None:
        ok = err.get("param") == param
    if ok and code is not None:
        ok = err.get("code") == code
    return ok


def stream(path, body):
    c = srv.conn()
    try:
        c.request("POST", path, body=json.dumps(dict(body, stream=True)),
                  headers=dict(AUTH, **{"Content-Type": "application/json"}))
        r = c.getresponse()
        return r.status, [json.loads(e) for e in sse_events(r) if e != "[DONE]"]
    finally:
        c.close()


CHAT = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 12,
        "temperature": 0}
COMP = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}

# ---- logprobs: shapes ------------------------------------------------------------------------------
st, r = post("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=3))
ch = r["choices"][0] if st == 200 else {}
lp = ch.get("logprobs") or {}
content = lp.get("content") or []
t.check(st == 200 and set(lp) == {"content", "refusal"} and lp["refusal"] is None,
        f"chat logprobs object: {st} {r}")
ntok = r.get("usage", {}).get("completion_tokens", -1)
t.check(len(content) == ntok or ch.get("finish_reason") == "stop",
        f"one chat logprobs entry per token: {len(content)} vs {ntok}")
good = bool(content)
for e in content:
    good = good and set(e) == {"token", "logprob", "bytes", "top_logprobs"}
    good = good and isinstance(e["logprob"], float) and e["logprob"] <= 0
    good = good and all(isinstance(b, int) and 0 <= b < 256 for b in e["bytes"])
    good = good and len(e["top_logprobs"]) == 3
    good = good and all(set(x) == {"token", "logprob", "bytes"} for x in e["top_logprobs"])
    tops = [x["logprob"] for x in e["top_logprobs"]]
    good = good and tops == sorted(tops, reverse=True)
    # greedy: the chosen token is the most likely one
    good = good and e["top_logprobs"][0]["logprob"] == e["logprob"]
    good = good and e["top_logprobs"][0]["bytes"] == e["bytes"]
t.check(good, f"chat logprobs entries: {content[:2]}")
text = ch.get("message", {}).get("content", "")
joined = b"".join(bytes(e["bytes"]) for e in content)
if "\ufffd" not in text:
    t.check(joined.decode() == text, f"the entries' bytes join into the answer: {joined!r} {text!r}")
plain_chat = r

st, r0 = post("/v1/chat/completions", CHAT)
t.check(st == 200 and r0["choices"][0]["logprobs"] is None, "no logprobs asked: null")
st, r0 = post("/v1/chat/completions", dict(CHAT, logprobs=True))
t.check(st == 200 and all(e["top_logprobs"] == [] for e in r0["choices"][0]["logprobs"]["content"])
        and [e["logprob"] for e in r0["choices"][0]["logprobs"]["content"]]
        == [e["logprob"] for e in content], "logprobs without top_logprobs: empty top lists")

st, r = post("/v1/completions", dict(COMP, logprobs=2))
ch = r["choices"][0] if st == 200 else {}
lp = ch.get("logprobs") or {}
t.check(st == 200 and set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"},
        f"completion logprobs object: {st} {r}")
n = len(lp.get("tokens", []))
t.check(n > 0 and all(len(lp[k]) == n for k in lp), f"completion logprobs lists of one length: {lp}")
t.check(all(isinstance(x, float) and x <= 0 for x in lp.get("token_logprobs", [])),
        "token_logprobs are log-probabilities")
t.check(all(isinstance(d, dict) and 1 <= len(d) <= 2 for d in lp.get("top_logprobs", [])),
        f"top_logprobs: dicts of at most 2: {lp.get('top_logprobs')}")
offs = lp.get("text_offset", [])
t.check(offs and offs[0] == 0 and offs == sorted(offs), f"text_offset ascending from 0: {offs}")
plain_comp = r
st, r0 = post("/v1/completions", dict(COMP, logprobs=0))
t.check(st == 200 and r0["choices"][0]["logprobs"]["top_logprobs"] == [{}] * n
        and r0["choices"][0]["logprobs"]["token_logprobs"] == lp.get("token_logprobs"),
        f"logprobs 0: the tokens' own, no alternatives: {r0}")
st, r0 = post("/v1/completions", COMP)
t.check(st == 200 and r0["choices"][0]["logprobs"] is None, "completion without logprobs: null")

# ---- logprobs: streamed = plain -----------------------------------------------------------------
st, evs = stream("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=3))
streamed = []
for e in evs:
    for c in e.get("choices", []):
        if c.get("logprobs"):
            streamed += c["logprobs"]["content"]
t.check(st == 200 and streamed == content, f"streamed chat logprobs join into the plain ones")
st, evs = stream("/v1/completions", dict(COMP, logprobs=2))
acc = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
for e in evs:
    for c in e.get("choices", []):
        for k in acc:
            acc[k] += (c.get("logprobs") or {}).get(k, [])
t.check(st == 200 and acc == plain_comp["choices"][0]["logprobs"],
        f"streamed completion logprobs join into the plain ones: {acc}")

# ---- logprobs and seeds under concurrent load --------------------------------------------------
SEEDED = {"prompt": "The dog", "max_tokens": 24, "temperature": 1.2, "seed": 4242}
st, r = post("/v1/completions", SEEDED)
seeded_text = r["choices"][0]["text"] if st == 200 else None
st, r = post("/v1/completions", SEEDED)
t.check(seeded_text is not None and st == 200 and r["choices"][0]["text"] == seeded_text,
        "the same seed gives the same text twice")
st, r = post("/v1/completions", dict(SEEDED, seed=4243))
t.check(st == 200 and r["choices"][0]["text"] != seeded_text, "another seed, another text")
unseeded = set()
for _ in range(3):
    st, r = post("/v1/completions", dict(SEEDED, seed=None))
    unseeded.add(r["choices"][0]["text"] if st == 200 else None)
t.check(len(unseeded) > 1, f"without a seed the text is random: {unseeded}")

results = {"seeded": [], "chat_lp": [], "comp_lp": [], "errors": []}
lock = threading.Lock()


def background(i):
    # other clients: random sampled answers of other lengths, streamed or not
    body = {"prompt": "A cat " * (i + 1), "max_tokens": 8 + 3 * i, "temperature": 1.0}
    for _ in range(3):
        if i % 2:
            stream("/v1/completions", body)
        else:
            post("/v1/completions", body)


def measured(kind):
    try:
        if kind == "seeded":
            st, r = post("/v1/completions", SEEDED)
            val = r["choices"][0]["text"]
        elif kind == "chat_lp":
            st, r = post("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=3))
            val = r["choices"][0]["logprobs"]
        else:
            st, r = post("/v1/completions", dict(COMP, logprobs=2))
            val = r["choices"][0]["logprobs"]
        with lock:
            results[kind].append(val)
    except Exception as e:  # recorded, then reported as a mismatch
        with lock:
            results["errors"].append(repr(e))


threads = [threading.Thread(target=background, args=(i,)) for i in range(5)]
threads += [threading.Thread(target=measured, args=(k,))
            for k in ["seeded", "chat_lp", "comp_lp"] * 3]
for th in threads:
    th.start()
for th in threads:
    th.join(300)
t.check(not results["errors"], f"no request failed under load: {results['errors']}")
t.check(len(results["seeded"]) == 3 and all(x == seeded_text for x in results["seeded"]),
        f"a seeded request under concurrent load gives its text: {results['seeded']} vs {seeded_text!r}")
t.check(len(results["chat_lp"]) == 3
        and all(x == plain_chat["choices"][0]["logprobs"] for x in results["chat_lp"]),
        "chat logprobs under concurrent load are the solo ones, bit for bit")
t.check(len(results["comp_lp"]) == 3
        and all(x == plain_comp["choices"][0]["logprobs"] for x in results["comp_lp"]),
        "completion logprobs under concurrent load are the solo ones, bit for bit")

# ---- logit_bias and penalties ------------------------------------------------------------------
# a two-letter token: no byte token has its text, so its text is its id
st, tok = post("/tokenize", {"content": "hello", "with_pieces": True})
ll = [p["id"] for p in tok.get("tokens", []) if p["piece"] == "ll"]
t.check(len(ll) == 1, f"'hello' has the token 'll': {tok}")
ll_id = ll[0] if ll else 0
st, r = post("/v1/completions", dict(COMP, logit_bias={str(ll_id): 100}))
t.check(st == 200 and r["choices"][0]["text"] == "ll" * COMP["max_tokens"],
        f"logit_bias +100 forces a token: {r}")
# -100 bans it: sampled hot, it never comes (the engine test bans a greedy
# token by id; here the API's ids are only the ones /tokenize gives)
HOT = dict(COMP, temperature=2, seed=11, max_tokens=64, logprobs=0)
EOS = 2  # the tiny model's </s>, banned too so that the answer runs its length
st, r = post("/v1/completions", dict(HOT, logit_bias={str(ll_id): -100, str(EOS): -100}))
toks = r["choices"][0]["logprobs"]["tokens"] if st == 200 else None
t.check(toks is not None and len(toks) == 64 and "ll" not in toks,
        f"logit_bias -100 bans a token: {toks}")
st, r = post("/v1/completions", dict(HOT, logit_bias={str(ll_id): 8, str(EOS): -100}))
toks = r["choices"][0]["logprobs"]["tokens"] if st == 200 else []
t.check(toks.count("ll") > 8, f"logit_bias +8 makes a token common: {toks}")
st, r = post("/v1/completions", dict(COMP, presence_penalty=0, frequency_penalty=0, logit_bias={}))
t.check(st == 200 and r["choices"][0]["text"] == plain_comp["choices"][0]["text"],
        "zero penalties and an empty bias change nothing")
st, r = post("/v1/completions", dict(COMP, presence_penalty=2, frequency_penalty=2, max_tokens=24))
t.check(st == 200 and r["choices"][0]["finish_reason"] in ("stop", "length"), f"penalties run: {r}")

# ---- several choices: each its own logprobs, seed + i, the bias in every one -------------------
st, r = post("/v1/completions", dict(SEEDED, n=3, logprobs=1))
chs = r.get("choices", []) if st == 200 else []
t.check(len(chs) == 3 and all(c["logprobs"] and len(c["logprobs"]["tokens"]) > 0 for c in chs),
        f"n=3 with logprobs: each choice has its own: {st} {r}")
for i, c in enumerate(chs):
    st, one = post("/v1/completions", dict(SEEDED, seed=SEEDED["seed"] + i, logprobs=1))
    t.check(st == 200 and one["choices"][0]["text"] == c["text"]
            and one["choices"][0]["logprobs"] == c["logprobs"],
            f"choice {i} is the request with seed + {i}, logprobs included")
st, evs = stream("/v1/completions", dict(SEEDED, n=2, logprobs=1))
per = {0: [], 1: []}
for e in evs:
    for c in e.get("choices", []):
        if c.get("logprobs"):
            per[c["index"]] += c["logprobs"]["token_logprobs"]
t.check(st == 200 and per[0] == chs[0]["logprobs"]["token_logprobs"]
        and per[1] == chs[1]["logprobs"]["token_logprobs"],
        "streamed choices carry their own logprobs")
st, r = post("/v1/completions", dict(COMP, n=2, temperature=1, logit_bias={str(ll_id): 100}))
t.check(st == 200 and [c["text"] for c in r["choices"]] == ["ll" * COMP["max_tokens"]] * 2,
        f"logit_bias applies to every choice: {r}")

# ---- bad values: 400 naming the field ----------------------------------------------------------
many = {str(i): 1 for i in range(301)}
BAD = [
    ("/v1/chat/completions", {"logprobs": "yes"}, "logprobs"),
    ("/v1/chat/completions", {"logprobs": 1}, "logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 2.5}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": "3"}, "top_logprobs"),
    ("/v1/chat/completions", {"top_logprobs": 3}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": False, "top_logprobs": 3}, "top_logprobs"),
    ("/v1/completions", {"logprobs": True}, "logprobs"),
    ("/v1/completions", {"logprobs": 21}, "logprobs"),
    ("/v1/completions", {"logprobs": -1}, "logprobs"),
    ("/v1/completions", {"logprobs": "2"}, "logprobs"),
    ("/v1/completions", {"seed": "1"}, "seed"),
    ("/v1/completions", {"seed": 1.5}, "seed"),
    ("/v1/completions", {"seed": 1e300}, "seed"),
    ("/v1/completions", {"presence_penalty": 2.01}, "presence_penalty"),
    ("/v1/completions", {"presence_penalty": -3}, "presence_penalty"),
    ("/v1/completions", {"presence_penalty": "1"}, "presence_penalty"),
    ("/v1/completions", {"frequency_penalty": -2.5}, "frequency_penalty"),
    ("/v1/completions", {"frequency_penalty": [1]}, "frequency_penalty"),
    ("/v1/chat/completions", {"frequency_penalty": True}, "frequency_penalty"),
    ("/v1/completions", {"logit_bias": [1, 2]}, "logit_bias"),
    ("/v1/completions", {"logit_bias": "x"}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"5": "x"}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"5": 100.5}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"5": -101}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"-5": 1}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"+5": 1}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"5.0": 1}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"": 1}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"abc": 1}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"99999999999": 1}}, "logit_bias"),
    ("/v1/completions", {"logit_bias": {"100000": 1}}, "logit_bias"),  # beyond the vocabulary
    ("/v1/chat/completions", {"logit_bias": many}, "logit_bias"),
]
for path, extra, param in BAD:
    base = CHAT if "chat" in path else COMP
    st, r = post(path, dict(base, **extra))
    t.check(is_error(st, r, 400, param), f"{path} {json.dumps(extra)[:80]}: 400 naming {param}: {st} {r}")
st, r = post("/v1/completions", dict(COMP, logit_bias={str(i): 0 for i in range(300)}))
t.check(st == 200, f"300 logit_bias entries are allowed: {st} {r}")

# ---- /tokenize and /detokenize ------------------------------------------------------------------
st, r = post("/tokenize", {"content": "hello world"})
ids = r.get("tokens") if st == 200 else None
t.check(isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids),
        f"tokenize: ids: {st} {r}")
st, r = post("/detokenize", {"tokens": ids or []})
t.check(st == 200 and r == {"content": "hello world"}, f"detokenize round-trips: {st} {r}")
st, r = post("/tokenize", {"content": "hello world", "with_pieces": True})
pieces = r.get("tokens") if st == 200 else []
t.check([p["id"] for p in pieces] == ids and "".join(p["piece"] for p in pieces) == "hello world",
        f"with_pieces: ids and pieces that join into the text: {r}")
st, r = post("/tokenize", {"content": "\u00e1", "with_pieces": True})
t.check(st == 200 and any(isinstance(p["piece"], list) and all(isinstance(b, int) for b in p["piece"])
                          for p in r["tokens"]),
        f"a piece that is not valid UTF-8 on its own is a list of bytes: {r}")
st, bos = post("/tokenize", {"content": "", "add_special": True})
bos_id = bos["tokens"][0] if st == 200 and bos.get("tokens") else None
t.check(bos_id is not None, f"add_special on empty text gives BOS: {bos}")
st, r = post("/tokenize", {"content": "hello world", "add_special": True})
t.check(st == 200 and r["tokens"] == [bos_id] + ids, f"add_special prepends BOS: {r}")
st, plain = post("/tokenize", {"content": "x<s>y"})
st2, special = post("/tokenize", {"content": "x<s>y", "parse_special": True})
t.check(st == 200 and bos_id not in plain["tokens"], f"user text is never a control token: {plain}")
t.check(st2 == 200 and bos_id in special["tokens"], f"parse_special: the special token: {special}")
st, r = post("/tokenize", {"content": ""})
t.check(st == 200 and r == {"tokens": []}, f"empty text: no tokens: {r}")
st, r = post("/detokenize", {"tokens": []})
t.check(st == 200 and r == {"content": ""}, f"no tokens: empty text: {r}")
BAD_TOK = [
    ("/tokenize", {}, "content", "missing_required_parameter"),
    ("/tokenize", {"content": 5}, "content", "invalid_value"),
    ("/tokenize", {"content": ["a"]}, "content", "invalid_value"),
    ("/tokenize", {"content": "a", "add_special": "yes"}, "add_special", "invalid_value"),
    ("/tokenize", {"content": "a", "parse_special": 1}, "parse_special", "invalid_value"),
    ("/tokenize", {"content": "a", "with_pieces": None and 0 or "no"}, "with_pieces",
     "invalid_value"),
    ("/tokenize", [1, 2], None, "invalid_json"),
    ("/tokenize", {"content": "a\u0000b"}, "content", "invalid_value"),
    ("/detokenize", {}, "tokens", "missing_required_parameter"),
    ("/detokenize", {"tokens": "1 2"}, "tokens", "invalid_value"),
    ("/detokenize", {"tokens": [1, -1]}, "tokens[1]", "invalid_value"),
    ("/detokenize", {"tokens": [1.5]}, "tokens[0]", "invalid_value"),
    ("/detokenize", {"tokens": ["1"]}, "tokens[0]", "invalid_value"),
    ("/detokenize", {"tokens": [0, 1, 100000]}, "tokens[2]", "invalid_value"),
    ("/detokenize", {"tokens": [1e300]}, "tokens[0]", "invalid_value"),
    ("/detokenize", "not json", None, "invalid_json"),
]
for path, body, param, code in BAD_TOK:
    st, r = post(path, body)
    t.check(is_error(st, r, 400, param, code), f"{path} {str(body)[:60]}: 400 {param} {code}: {st} {r}")
st, r = srv.json("POST", "/tokenize", {"content": "a"})
t.check(is_error(st, r, 401, None, "invalid_api_key"), f"/tokenize needs the key: {st} {r}")
st, r = srv.json("GET", "/tokenize", None, AUTH)
t.check(is_error(st, r, 405, None, "method_not_allowed"), f"GET /tokenize: 405 {st}")

# ---- the page ----------------------------------------------------------------------------------
for path, ctype in [("/", "text/html"), ("/chat.js", "text/javascript"), ("/chat.css", "text/css")]:
    st, hd, body = srv.request("GET", path)  # no key: the page itself asks for it
    csp = hd.get("Content-Security-Policy", "")
    t.check(st == 200 and hd.get("Content-Type", "").startswith(ctype) and len(body) > 100
            and "default-src 'none'" in csp and "script-src 'self'" in csp
            and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
            and "unsafe" not in csp and hd.get("X-Content-Type-Options") == "nosniff",
            f"GET {path}: {st} {hd}")
src = os.environ.get("PW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
with open(os.path.join(src, "tools", "page", "index.html"), "rb") as f:
    t.check(srv.request("GET", "/")[2] == f.read(), "the page is the file, byte for byte")
st, hd, body = srv.request("GET", "/chat.js")
t.check(b"innerHTML" not in body and b"textContent" in body, "the page's script never sets innerHTML")
st, r = srv.json("POST", "/", {})
t.check(is_error(st, r, 405, None, "method_not_allowed"), f"POST /: 405 {st}")
st, r = srv.json("GET", "/index.html")
t.check(is_error(st, r, 404, None, "not_found"), f"GET /index.html: 404 {st}")

# ---- a seeded answer survives a restart --------------------------------------------------------
t.check(srv.terminate() == 0, "exit 0 on SIGTERM")
srv = Server(binary, model, "--max-seqs", "2", "--api-key", KEY)
st, r = post("/v1/completions", SEEDED)
t.check(st == 200 and r["choices"][0]["text"] == seeded_text,
        f"the seeded text after a restart (another --max-seqs too): {r} vs {seeded_text!r}")
st, r = post("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=3))
t.check(st == 200 and r["choices"][0]["logprobs"] == plain_chat["choices"][0]["logprobs"],
        "logprobs after a restart are the same bits")
t.check(srv.terminate() == 0, "exit 0 on SIGTERM after the restart")
t.finish()
