"""piecewise serve driven by the official openai Python client: model list,
completions (plain and streaming), 16 concurrent greedy streams each equal
to the solo answer, and chat (plain and streaming) with SmolLM2 when its
GGUF is present. Usage: test_openai.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import os
import sys
import threading

import openai

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import Checks, Server, raw_model, smollm_model  # noqa: E402

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
t = Checks("serve_openai")

srv = Server(binary, raw_model(tiny_tool, workdir), "--max-seqs", "16", "--api-key", "k1")
client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="k1", timeout=300,
                       max_retries=0)
models = client.models.list()
t.check(len(models.data) == 1 and models.data[0].id, f"models.list: {models}")
name = models.data[0].id

c = client.completions.create(model=name, prompt="Once upon a time", max_tokens=20, temperature=0)
solo = c.choices[0].text
t.check(len(solo) > 0 and c.choices[0].finish_reason in ("length", "stop")
        and c.usage.completion_tokens <= 20, f"completion: {c}")
parts = [ch.choices[0].text for ch in
         client.completions.create(model=name, prompt="Once upon a time", max_tokens=20,
                                   temperature=0, stream=True)]
t.check("".join(parts) == solo, f"streamed completion {''.join(parts)!r} != {solo!r}")

results = [None] * 16


def one(i):
    try:
        s = client.completions.create(model=name, prompt="Once upon a time", max_tokens=20,
                                      temperature=0, stream=True)
        results[i] = "".join(ch.choices[0].text for ch in s)
    except Exception as e:  # recorded as a mismatch
        results[i] = f"error: {e}"


threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
for th in threads:
    th.start()
for th in threads:
    th.join(300)
t.check(all(r == solo for r in results), f"16 concurrent greedy streams equal solo: {results}")

try:
    client.completions.create(model=name, prompt="x", max_tokens=0)
    t.check(False, "max_tokens=0 accepted")
except openai.BadRequestError as e:
    t.check(e.status_code == 400 and "max_tokens" in str(e), f"BadRequestError: {e}")
bad = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="nope", max_retries=0)
try:
    bad.models.list()
    t.check(False, "wrong key accepted")
except openai.AuthenticationError as e:
    t.check(e.status_code == 401, f"AuthenticationError: {e}")
t.check(srv.terminate() == 0, "exit 0 on SIGTERM")

chat_model = smollm_model()
if chat_model:
    srv = Server(binary, chat_model, "--max-seqs", "4", "--ctx", "512", "--threads", "2")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none",
                           timeout=600, max_retries=0)
    # An explicit system message: with SmolLM2's default one ("You are a helpful
    # AI assistant named SmolLM...") this 135M model answers the question in French.
    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model="smollm", messages=msgs, max_tokens=24,
                                       temperature=0)
    answer = r.choices[0].message.content
    t.check(r.object == "chat.completion" and r.choices[0].message.role == "assistant"
            and answer == "The capital of France is Paris." and r.usage.prompt_tokens > 10
            and r.choices[0].finish_reason == "stop", f"chat: {r}")
    chunks = list(client.chat.completions.create(model="smollm", messages=msgs, max_tokens=24,
                                                 temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    t.check(text == answer, f"streamed chat {text!r} != {answer!r}")
    t.check(chunks[0].choices[0].delta.role == "assistant", "first chunk carries the role")
    t.check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens
            == r.usage.completion_tokens, f"usage chunk: {chunks[-1]}")
    r2 = client.chat.completions.create(model="smollm", messages=msgs, max_completion_tokens=3,
                                        temperature=0)
    t.check(r2.choices[0].finish_reason == "length" and r2.usage.completion_tokens == 3,
            f"max_completion_tokens: {r2}")
    t.check(srv.terminate() == 0, "chat server exit 0 on SIGTERM")
else:
    t.skip_part("SmolLM2-135M-Instruct.Q4_1.gguf not fetched (scripts/fetch-model.sh): the chat checks")
t.finish()
