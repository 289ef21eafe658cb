"""piecewise serve over raw HTTP (standard library only): the endpoints,
every bad input a client can send (4xx with an OpenAI-style error, and the
server keeps serving), continuous batching (greedy answers alone and
beside 15 others agree), a client that disconnects mid-stream, 429, 401,
idle-connection timeout and SIGTERM.

Usage: test_http.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import Checks, Server, raw_model, sse_events, stream_text, deadline  # noqa: E402

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
t = Checks("serve_http")
model = raw_model(tiny_tool, workdir)
PROMPT = "Once upon a time"


def is_error(st, body, status, code=None):
    err = body.get("error") if isinstance(body, dict) else None
    ok = (st == status and isinstance(err, dict) and isinstance(err.get("message"), str)
          and "type" in err and "param" in err and "code" in err)
    if ok and code is not None:
        ok = err["code"] == code
    return ok


# ---- command-line errors: exit 2 with a clear message --------------------------------------------
def cli(args, code, msg):
    p = subprocess.run([binary, "serve", *args], capture_output=True, text=True, timeout=120)
    t.check(p.returncode == code and msg in p.stderr,
            f"serve {args} -> exit {p.returncode} (want {code}), stderr: {p.stderr.strip()}")


cli([], 2, "no model given")
cli([model, "--port", "70000"], 2, "outside [0, 65535]")
cli([model, "--port"], 2, "needs a value")
cli([model, "--max-seqs", "x"], 2, "is not an integer")
cli([model, "--mode", "fastest"], 2, "unknown mode 'fastest'")
cli([model, "--bogus"], 2, "unknown option '--bogus'")
cli([model, "--api-key", ""], 2, "the key is empty")
cli([model, "--verify-every", "-1"], 2, "outside [0,")
cli([model, "--max-seqs", "8", "--max-batched-tokens", "4"], 2, "must be at least --max-seqs")
cli([model, "--kv-positions", "8"], 2, "outside [16,")
cli([model, "--kv-positions", "lots"], 2, "is not an integer")
cli(["/no/such/model.gguf"], 1, "/no/such/model.gguf")
cli([model, "--host", "not-an-address", "--port", "0"], 1, "not a numeric")
h = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=60)
for opt in ["--host", "--port", "--max-seqs", "--threads", "--api-key", "--mode", "--max-queue",
            "--timeout", "--verify-every", "--kv-positions"]:
    t.check(h.returncode == 0 and opt in h.stdout, f"serve --help documents {opt}")

# ---- the main server ------------------------------------------------------------------------
srv = Server(binary, model, "--max-seqs", "16", "--timeout", "2", "--max-body", "65536",
             "--verify-every", "3")

st, body = srv.json("GET", "/health")
t.check(st == 200 and body.get("status") == "ok", f"/health: {st} {body}")
st, body = srv.json("GET", "/v1/models")
t.check(st == 200 and body.get("object") == "list" and len(body.get("data", [])) == 1
        and body["data"][0].get("object") == "model", f"/v1/models: {st} {body}")

# a greedy completion, non-streaming
req = {"prompt": PROMPT, "max_tokens": 24, "temperature": 0}
st, solo = srv.json("POST", "/v1/completions", req)
ok = t.check(st == 200 and solo.get("object") == "text_completion", f"completion: {st} {solo}")
if ok:
    ch = solo["choices"][0]
    t.check(ch["finish_reason"] in ("length", "stop") and len(ch["text"]) > 0,
            f"completion choice: {ch}")
    u = solo["usage"]
    t.check(u["completion_tokens"] <= 24 and u["prompt_tokens"] > 0
            and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], f"usage: {u}")
    if ch["finish_reason"] == "length":
        t.check(u["completion_tokens"] == 24, f"length finish with {u['completion_tokens']} tokens")
solo_text = solo["choices"][0]["text"] if ok else None

# the same, streaming: the chunks add up to the same text, then [DONE]
c = srv.conn()
c.request("POST", "/v1/completions", body=json.dumps(dict(req, stream=True)),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
t.check(r.status == 200 and r.getheader("Content-Type", "").startswith("text/event-stream"),
        f"stream status {r.status} {r.getheader('Content-Type')}")
ev = sse_events(r)
c.close()
t.check(ev and ev[-1] == "[DONE]", f"stream ends with [DONE]: {ev[-2:]}")
t.check(stream_text(ev) == solo_text, f"stream text {stream_text(ev)!r} != {solo_text!r}")
finals = [json.loads(e)["choices"][0].get("finish_reason") for e in ev[:-1]]
t.check(finals and finals[-1] in ("length", "stop") and all(f is None for f in finals[:-1]),
        f"finish_reason only on the last chunk: {finals}")

# a stop string cuts the answer before it
if solo_text and len(solo_text) > 6:
    stop = solo_text[3:6]
    st, b = srv.json("POST", "/v1/completions", dict(req, stop=[stop, "zzzz"]))
    t.check(st == 200 and b["choices"][0]["finish_reason"] == "stop"
            and b["choices"][0]["text"] == solo_text[:solo_text.index(stop)],
            f"stop {stop!r}: {b}")
    c = srv.conn()
    c.request("POST", "/v1/completions", body=json.dumps(dict(req, stop=stop, stream=True)),
              headers={"Content-Type": "application/json"})
    ev = sse_events(c.getresponse())
    c.close()
    t.check(stream_text(ev) == solo_text[:solo_text.index(stop)], f"streamed stop: {ev}")

# ---- continuous batching: 16 concurrent greedy requests each equal the solo answer ---------------
results = [None] * 16


def one(i):
    try:
        c = srv.conn(300)
        c.request("POST", "/v1/completions", body=json.dumps(dict(req, stream=True)),
                  headers={"Content-Type": "application/json"})
        results[i] = stream_text(sse_events(c.getresponse()))
        c.close()
    except Exception as e:  # recorded as a mismatch
        results[i] = f"error: {e}"


steps_before = srv.metric('piecewise_engine_steps_total{mode="full"}') or 0
threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
for th in threads:
    th.start()
for th in threads:
    th.join(300)
t.check(all(x == solo_text for x in results),
        f"16 concurrent greedy streams equal the solo answer: {results}")
mt = srv.metrics_text()
for name in ["piecewise_requests_total{code=\"200\"}", "piecewise_prompt_tokens_total",
             "piecewise_generation_tokens_total", "piecewise_requests_running",
             "piecewise_requests_waiting", "piecewise_engine_steps_total{mode=\"piecewise\"}",
             "piecewise_engine_tokens_total{mode=\"full\",kind=\"padded\"}",
             "piecewise_capture_seconds", "piecewise_graph_pool_bytes{kind=\"reserved\"}",
             "piecewise_time_to_first_token_seconds_bucket{le=\"+Inf\"}",
             "piecewise_inter_token_latency_seconds_count", "piecewise_requests_cancelled_total"]:
    t.check(name + " " in mt, f"/metrics has {name}")
real = srv.metric('piecewise_engine_tokens_total{mode="full",kind="real"}')
padded = srv.metric('piecewise_engine_tokens_total{mode="full",kind="padded"}')
t.check(real is not None and padded is not None and 0 < real <= padded,
        f"full-mode tokens real {real} <= padded {padded}")
t.check(srv.metric("piecewise_generation_tokens_total") >= 16 * 1,
        "generated tokens counted")
# --verify-every 3: the canary re-ran steps eagerly and found no difference
t.check(srv.metric("piecewise_verify_checks_total") > 0, "the bitwise canary ran")
t.check(srv.metric("piecewise_verify_mismatches_total") == 0,
        f"the bitwise canary found no difference: {[x for x in srv.log if 'canary' in x][:3]}")

# ---- bad input: 4xx with an error object, and the server goes on ----------------------------
bad = [
    ("/v1/completions", b"{not json", 400, "invalid_json"),
    ("/v1/completions", b"[1, 2]", 400, "invalid_json"),
    ("/v1/completions", b"\"a string\"", 400, "invalid_json"),
    ("/v1/completions", b"", 400, "invalid_json"),
    ("/v1/completions", b'{"prompt": "a"} trailing', 400, "invalid_json"),
    ("/v1/completions", b'{"max_tokens": 4}', 400, "missing_required_parameter"),
    ("/v1/completions", b'{"prompt": 5}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": ""}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": ["a", "b"]}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "max_tokens": "4"}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "max_tokens": 0}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "max_tokens": 2.5}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "temperature": 3}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "temperature": "hot"}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "top_p": 1.5}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "top_k": -1}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "seed": "x"}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "stream": 1}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "stop": 7}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "stop": ["a","b","c","d","e"]}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "stop": [""]}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "n": 17}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a", "model": 3}', 400, "invalid_value"),
    ("/v1/completions", b'{"prompt": "a\xff\xfe"}', 400, "invalid_utf8"),
    ("/v1/completions", b'{"prompt": "\xc0\xaf"}', 400, "invalid_utf8"),
    ("/v1/completions", b'{"prompt": "a", "max_tokens": 1000000}', 400, "context_length_exceeded"),
    ("/v1/completions", json.dumps({"prompt": "the cat " * 3000}).encode(), 400,
     "context_length_exceeded"),
    ("/v1/chat/completions", b'{"messages": "hi"}', 400, "invalid_value"),
    ("/v1/chat/completions", b'{}', 400, "missing_required_parameter"),
    ("/v1/chat/completions", b'{"messages": []}', 400, "invalid_value"),
    ("/v1/chat/completions", b'{"messages": [{"role": "robot", "content": "x"}]}', 400,
     "invalid_value"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user"}]}', 400,
     "missing_required_parameter"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": 4}]}', 400,
     "invalid_value"),
]
for path, payload, status, code in bad:
    st, b = srv.json("POST", path, payload)
    t.check(is_error(st, b, status, code), f"POST {path} {payload[:60]!r} -> {st} {b} "
                                           f"(want {status} {code})")
# a chat request to a model without a chat template
st, b = srv.json("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
t.check(is_error(st, b, 400, "no_chat_template"), f"chat without a template: {st} {b}")
# unknown path, wrong method, oversized body
st, b = srv.json("GET", "/v1/nothing")
t.check(is_error(st, b, 404), f"unknown path: {st} {b}")
st, hd, data = srv.request("GET", "/v1/completions")
t.check(st == 405 and hd.get("Allow") == "POST" and is_error(st, json.loads(data), 405),
        f"wrong method: {st} {hd} {data}")
st, b = srv.json("DELETE", "/health")
t.check(is_error(st, b, 405), f"DELETE /health: {st} {b}")
st, b = srv.json("POST", "/v1/completions", {"prompt": "x" * 70000})
t.check(is_error(st, b, 413, "body_too_large"), f"oversized body: {st} {b}")
# oversized without Content-Length (chunked upload)
c = srv.conn()
c.putrequest("POST", "/v1/completions")
c.putheader("Transfer-Encoding", "chunked")
c.putheader("Content-Type", "application/json")
c.endheaders()
payload = json.dumps({"prompt": "y" * 70000}).encode()
for k in range(0, len(payload), 8192):
    part = payload[k:k + 8192]
    c.send(b"%x\r\n%s\r\n" % (len(part), part))
c.send(b"0\r\n\r\n")
r = c.getresponse()
t.check(r.status == 413, f"chunked oversized body: {r.status}")
c.close()
st, b = srv.json("POST", "/v1/completions", req)
t.check(st == 200 and b["choices"][0]["text"] == solo_text, "still serving after bad input")

# ---- a client that disconnects mid-stream cancels its request ------------------------------------
cancelled0 = srv.metric("piecewise_requests_cancelled_total")
s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
body = json.dumps({"prompt": PROMPT, "max_tokens": srv.ctx - 16, "temperature": 0,
                   "stream": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
got = b""
alive = deadline(60)
while b"data: " not in got and alive():
    chunk = s.recv(4096)
    if not chunk:
        break
    got += chunk
t.check(b"data: " in got, f"stream started before the disconnect: {got[:200]!r}")
s.close()
alive = deadline(30)
while alive() and srv.metric("piecewise_requests_cancelled_total") == cancelled0:
    time.sleep(0.1)
t.check(srv.metric("piecewise_requests_cancelled_total") == cancelled0 + 1,
        "the cancelled counter moved after a mid-stream disconnect")
alive = deadline(30)
while alive() and srv.metric("piecewise_requests_running") != 0:
    time.sleep(0.1)
t.check(srv.metric("piecewise_requests_running") == 0, "the cancelled request left the engine")
st, b = srv.json("POST", "/v1/completions", req)
t.check(st == 200 and b["choices"][0]["text"] == solo_text, "healthy after a disconnect")

# ---- an idle client is timed out (--timeout 2) ---------------------------------------------------
s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # never finishes its headers
t0 = time.monotonic()
try:
    closed = s.recv(100) == b""
except (ConnectionResetError, socket.timeout):
    closed = True
t.check(closed and time.monotonic() - t0 < 15, "a slow client's connection is closed")
s.close()
t.check(srv.json("GET", "/health")[0] == 200, "healthy after a timed-out client")
t.check(srv.alive(), "server alive")
rc = srv.terminate()
t.check(rc == 0, f"SIGTERM with nothing in flight: exit {rc}")

# ---- 429 when the queue is full; 401 without the key; SIGTERM finishes what is in flight --------
srv = Server(binary, model, "--max-seqs", "1", "--max-queue", "0", "--api-key", "sekrit")
auth = {"Authorization": "Bearer sekrit"}
st, b = srv.json("POST", "/v1/completions", req)
t.check(is_error(st, b, 401, "invalid_api_key"), f"no key: {st} {b}")
st, b = srv.json("POST", "/v1/completions", req, {"Authorization": "Bearer wrong"})
t.check(is_error(st, b, 401), f"wrong key: {st} {b}")
st, b = srv.json("GET", "/v1/models", None, {"Authorization": "Bearer sekri"})
t.check(is_error(st, b, 401), f"prefix of the key: {st} {b}")
st, b = srv.json("GET", "/v1/models", None, auth)
t.check(st == 200, f"right key: {st}")
t.check(srv.json("GET", "/health")[0] == 200, "/health needs no key")

# a burst against one slot and a queue of one: some get 429, the rest their full answer
burst = [None] * 12
long_body = {"prompt": PROMPT, "max_tokens": srv.ctx - 16, "temperature": 0}


def burst_one(i):
    try:
        burst[i] = srv.json("POST", "/v1/completions", long_body, auth, timeout=300)
    except Exception as e:  # recorded as a failure below
        burst[i] = (None, {"exception": str(e)})


ths = [threading.Thread(target=burst_one, args=(i,)) for i in range(len(burst))]
for th in ths:
    th.start()
for th in ths:
    th.join(300)
n429 = sum(1 for st, b in burst if is_error(st, b, 429, "queue_full"))
n200 = [b for st, b in burst if st == 200]
t.check(n429 >= 1 and n429 + len(n200) == len(burst),
        f"burst: {n429} x 429, {len(n200)} x 200 of {len(burst)}: "
        f"{[st for st, _ in burst]}")
t.check(len({b["choices"][0]["text"] for b in n200}) == 1, "every admitted burst answer agrees")
t.check(srv.metric('piecewise_requests_total{code="429"}') == n429, "429s counted")

# SIGTERM while a request is in flight (its body half sent): it still gets
# its answer, then the server exits 0
body = json.dumps(dict(req, max_tokens=8)).encode()
s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Authorization: Bearer sekrit\r\nConnection: close\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:10]))
ka = srv.conn()  # a kept-alive connection that asks again while the server drains
ka.request("GET", "/health")
ka_first = ka.getresponse()
ka_first.read()
time.sleep(0.5)
srv.proc.send_signal(signal.SIGTERM)
alive = deadline(30)
while alive() and not any("finishing" in line for line in srv.log):
    time.sleep(0.05)
t.check(any("finishing 1 request" in line for line in srv.log),
        f"shutdown waits for the request in flight: {srv.log[-3:]}")
ka.request("GET", "/health")
st = ka.getresponse().status
ka.close()
t.check(ka_first.status == 200 and st == 503, f"a new request while draining: {st}")
s.sendall(body[10:])
got = b""
alive = deadline(60)
while alive():
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
s.close()
t.check(got.startswith(b"HTTP/1.1 200") and b'"text_completion"' in got,
        f"the in-flight request was answered after SIGTERM: {got[:300]!r}")
try:
    rc = srv.proc.wait(60)
except subprocess.TimeoutExpired:
    rc = None
t.check(rc == 0, f"SIGTERM exit status {rc}")
t.check(not srv.alive(), "server gone after SIGTERM")
srv.kill()

# ---- a stream that waits in the queue longer than the idle timeout is kept
# open with SSE comments, and then answered in full
srv = Server(binary, model, "--max-seqs", "1", "--max-queue", "8", "--timeout", "1")
ahead = [threading.Thread(target=srv.json, args=("POST", "/v1/completions", long_body))
         for _ in range(4)]
for th in ahead:
    th.start()
time.sleep(0.1)
c = srv.conn()
c.request("POST", "/v1/completions", body=json.dumps(dict(req, stream=True)),
          headers={"Content-Type": "application/json"})
raw = c.getresponse().read().decode()
c.close()
events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
t.check(events and events[-1] == "[DONE]" and stream_text(events) == solo_text,
        f"queued stream answered in full: {raw[-200:]!r}")
t.check(all(line.startswith(("data: ", ": keep-alive")) for line in raw.splitlines() if line),
        "only data lines and keep-alive comments")
for th in ahead:
    th.join(300)
t.check(srv.terminate() == 0, "exit 0")
t.finish()
