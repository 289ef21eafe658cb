"""piecewise serve: the prefix cache and "n".
 - n: n greedy choices, streamed and not, on completions and chat, each
   equal to the solo answer, indexed 0..n-1, usage counting the prompt once;
   bad n (0, 17, a string, a fraction, a bool) is a 400 naming "n";
 - the prefix cache: concurrent greedy requests sharing a long prefix give
   the same answers with the cache on and with --no-prefix-cache; the
   metrics count prompt tokens looked up and found, and the choices of one
   request find the prompt in the cache.
Usage: test_prefix.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import Checks, Server, raw_model, sse_events  # noqa: E402

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
t = Checks("serve_prefix")
model = raw_model(tiny_tool, workdir)
TEMPLATE = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
chat_model = os.path.join(workdir, "tiny_chat.gguf")
subprocess.run([tiny_tool, chat_model, TEMPLATE], check=True, timeout=60)

PREFIX = ("Once upon a time, there was a little girl named Lily. She loved to play outside in "
          "the park with her big red ball and her small brown dog. One day, her mom said")
TAILS = [" that they would go", " no", " that the sun", " hello to the dog", "", " that the cat",
         " yes", " that Ben"]


def complete(srv, prompt, **kw):
    body = {"prompt": prompt, "max_tokens": 12, "temperature": 0}
    body.update(kw)
    return srv.json("POST", "/v1/completions", body, timeout=300)


def stream_choices(srv, path, body):
    """{index: text}, finish reasons by index, and the events."""
    c = srv.conn(300)
    c.request("POST", path, body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events = sse_events(r)
    c.close()
    texts, finish = {}, {}
    for e in events:
        if e == "[DONE]":
            break
        j = json.loads(e)
        for ch in j.get("choices", []):
            i = ch["index"]
            piece = ch.get("text") if "text" in ch else (ch.get("delta", {}).get("content") or "")
            texts[i] = texts.get(i, "") + (piece or "")
            if ch.get("finish_reason"):
                finish[i] = ch["finish_reason"]
    return r.status, texts, finish, events


def run_together(srv, prompts):
    out = [None] * len(prompts)

    def one(i):
        st, b = complete(srv, prompts[i])
        out[i] = b["choices"][0]["text"] if st == 200 else f"error {st}: {b}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    return out


# ---- the cache on and off give the same answers ------------------------------------------------
prompts = [PREFIX + tail for tail in TAILS]
answers = {}
for flag in ([], ["--no-prefix-cache"]):
    srv = Server(binary, model, "--max-seqs", "8", "--max-batched-tokens", "16", *flag)
    answers[bool(flag)] = run_together(srv, prompts)
    queried = srv.metric("piecewise_prefix_cache_queries_total")
    hits = srv.metric("piecewise_prefix_cache_hits_total")
    if flag:
        t.check(queried == 0 and hits == 0, f"--no-prefix-cache looks nothing up: {queried} {hits}")
    else:
        t.check(queried and queried > 0 and hits and 0 < hits < queried,
                f"the shared prefix is found: {hits} of {queried} tokens")
        # the same prompt again: all but its last token comes from the cache
        # (its last, partial block lent by the block the first answer filled),
        # so its prefill is one token
        before = srv.metric("piecewise_prefix_cache_hits_total")
        prefilled = srv.metric("piecewise_prompt_tokens_total")
        st, b = complete(srv, prompts[0])
        n_prompt = b["usage"]["prompt_tokens"]
        got = srv.metric("piecewise_prefix_cache_hits_total") - before
        prefilled = srv.metric("piecewise_prompt_tokens_total") - prefilled
        t.check(st == 200 and b["choices"][0]["text"] == answers[False][0]
                and got == n_prompt - 1 and prefilled == 1,
                f"a repeated prompt hits {got} of {n_prompt} tokens, prefills {prefilled}")
    t.check(srv.terminate() == 0, "exit 0 on SIGTERM")
t.check(answers[False] == answers[True] and not any(a.startswith("error") for a in answers[False]),
        f"cache on and off agree: {answers}")

# ---- n ----------------------------------------------------------------------------------------
srv = Server(binary, model, "--max-seqs", "8", "--max-queue", "16")
solo_st, solo = complete(srv, PREFIX)
solo_text = solo["choices"][0]["text"] if solo_st == 200 else None
t.check(solo_st == 200 and solo_text, f"solo: {solo_st} {solo}")
before = srv.metric("piecewise_prefix_cache_hits_total")
st, b = complete(srv, PREFIX + " again", n=4)
choices = b.get("choices", [])
t.check(st == 200 and [c["index"] for c in choices] == [0, 1, 2, 3]
        and all(c["finish_reason"] in ("stop", "length") for c in choices),
        f"n=4: {st} {b}")
st1, one = complete(srv, PREFIX + " again")
t.check(st1 == 200 and all(c["text"] == one["choices"][0]["text"] for c in choices),
        f"n=4 greedy choices equal the solo answer: {choices} vs {one}")
t.check(st == 200 and b["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]
        and b["usage"]["completion_tokens"] == 4 * one["usage"]["completion_tokens"],
        f"usage counts the prompt once and every choice: {b.get('usage')} vs {one['usage']}")
t.check(srv.metric("piecewise_prefix_cache_hits_total") - before >= 3 * 16,
        "the later choices find the prompt in the cache")

# streamed, 16 choices, more than --max-seqs: they queue and still all finish
status, texts, finish, events = stream_choices(
    srv, "/v1/completions", {"prompt": PREFIX, "max_tokens": 12, "temperature": 0, "n": 16})
t.check(status == 200 and sorted(texts) == list(range(16)) and sorted(finish) == list(range(16))
        and all(texts[i] == solo_text for i in range(16)) and events[-1] == "[DONE]",
        f"streamed n=16: {status} {texts} {finish}")

# sampled choices differ (with a fixed seed, n=4 of a long answer)
st, b = complete(srv, PREFIX, n=4, temperature=1.0, seed=7, max_tokens=24)
t.check(st == 200 and len({c["text"] for c in b["choices"]}) > 1,
        f"sampled choices are not all the same: {b}")

# bad n: 400 naming the field
for bad in (0, 17, -1, "2", 1.5, True, [2], {"n": 2}):
    st, b = complete(srv, PREFIX, n=bad)
    err = b.get("error", {}) if isinstance(b, dict) else {}
    t.check(st == 400 and err.get("param") == "n" and "'n'" in err.get("message", ""),
            f"n={bad!r}: {st} {b}")
# null is "not given"
st, b = complete(srv, PREFIX, n=None)
t.check(st == 200 and len(b["choices"]) == 1, f"n=null: {st} {b}")
# more choices than the queue can hold at once: 429, nothing half-queued
t.check(srv.terminate() == 0, "exit 0 on SIGTERM")
srv = Server(binary, model, "--max-seqs", "2", "--max-queue", "1")
st, b = complete(srv, PREFIX, n=4)
t.check(st == 429 and b.get("error", {}).get("code") == "queue_full", f"n past the queue: {st} {b}")
st, b = complete(srv, PREFIX, n=3)
t.check(st == 200 and len(b["choices"]) == 3, f"n within the queue: {st} {b}")
t.check(srv.metric("piecewise_requests_running") == 0
        and srv.metric("piecewise_requests_waiting") == 0, "nothing left behind")
t.check(srv.terminate() == 0, "exit 0 on SIGTERM")

# chat: n choices, streamed and not
srv = Server(binary, chat_model, "--max-seqs", "4")
msgs = [{"role": "system", "content": PREFIX}, {"role": "user", "content": "Tell me more."}]
body = {"messages": msgs, "max_tokens": 8, "temperature": 0}
st, one = srv.json("POST", "/v1/chat/completions", body, timeout=300)
st2, b = srv.json("POST", "/v1/chat/completions", dict(body, n=3), timeout=300)
t.check(st == 200 and st2 == 200 and [c["index"] for c in b["choices"]] == [0, 1, 2]
        and all(c["message"] == one["choices"][0]["message"] for c in b["choices"]),
        f"chat n=3: {b} vs {one}")
status, texts, finish, events = stream_choices(srv, "/v1/chat/completions", dict(body, n=2))
roles = [json.loads(e)["choices"][0]["delta"].get("role") for e in events[:-1]
         if json.loads(e)["choices"]]
t.check(status == 200 and texts == {0: one["choices"][0]["message"]["content"],
                                    1: one["choices"][0]["message"]["content"]}
        and sorted(finish) == [0, 1] and roles.count("assistant") == 2,
        f"streamed chat n=2: {status} {texts} {finish} {roles}")
st, b = srv.json("POST", "/v1/chat/completions", dict(body, n=17))
t.check(st == 400 and b["error"]["param"] == "n", f"chat n=17: {st} {b}")
t.check(srv.terminate() == 0, "exit 0 on SIGTERM")

t.finish()
