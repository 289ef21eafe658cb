"""piecewise serve against hostile clients, over raw sockets on 127.0.0.1:

- framing that another parser could read differently (Content-Length with
  Transfer-Encoding, two lengths, a space before a colon, unknown codings,
  no Host) is refused once with 400 and "Connection: close", and the bytes
  after it never run as a second request;
- malformed lengths and chunk extensions get one 4xx JSON answer; the
  absolute request form is served; error bodies are valid UTF-8 JSON; the
  auth scheme is matched in any case; a refused large body is readable;
- slow clients: a head and a body have deadlines from their first byte,
  and a flood of slow connections from one address does not keep normal
  requests out;
- metrics: received = answered + cancelled, under concurrent load with
  disconnects;
- a bounded random-framing loop never crashes the server, never hangs past
  its deadlines, and never changes another client's answer.

Usage: test_hostile.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import http.client
import json
import os
import random
import re
import resource
import select
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import Checks, Server, raw_model, deadline  # noqa: E402

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
t = Checks("serve_hostile")
model = raw_model(tiny_tool, workdir)
KEY = "sekrit"
AUTH = b"Authorization: Bearer " + KEY.encode() + b"\r\n"
REQ = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}
BODY = json.dumps(REQ).encode()


def parse_responses(buf):
    """The complete HTTP responses at the start of buf: [(status, headers, body)]."""
    out = []
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return out
        lines = buf[:end].split(b"\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3}) ", lines[0] + b" ")
        if not m:
            out.append((None, {}, buf))
            return out
        hd = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(b":")
            hd[k.strip().lower().decode()] = v.strip().decode("latin-1")
        status = int(m.group(1))
        rest = buf[end + 4:]
        if status == 100:
            buf = rest
            continue
        n = int(hd.get("content-length", "0"))
        out.append((status, hd, rest[:n]))
        buf = rest[n:]


def exchange(data, wait=10, chunks=None):
    """Sends data (or each of chunks), reads until the server closes or
    wait seconds pass; (bytes read, whether the server closed)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=wait)
    got = b""
    closed = False
    try:
        for part in (chunks or [data]):
            s.sendall(part)
        alive = deadline(wait)
        while alive():
            r, _, _ = select.select([s], [], [], 0.2)
            if not r:
                continue
            try:
                c = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                closed = True
                break
            if not c:
                closed = True
                break
            got += c
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    finally:
        s.close()
    return got, closed


def json_error(body):
    try:
        j = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    e = j.get("error") if isinstance(j, dict) else None
    return e if isinstance(e, dict) and isinstance(e.get("message"), str) else None


def accounting():
    """(received, answered, cancelled) from one /metrics answer."""
    received = answered = cancelled = None
    for line in srv.metrics_text().splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("piecewise_requests_total{"):
            answered = (answered or 0) + float(value)
        elif name == "piecewise_requests_received_total":
            received = float(value)
        elif name == "piecewise_requests_cancelled_total":
            cancelled = float(value)
    return received, answered, cancelled


def refused_once(name, data, status=400, wait=6):
    """data gets exactly one answer, with status, Connection: close, a JSON
    error, and the connection closes (nothing smuggled after it runs)."""
    got, closed = exchange(data, wait)
    rs = parse_responses(got)
    ok = (len(rs) == 1 and rs[0][0] == status and rs[0][1].get("connection") == "close"
          and json_error(rs[0][2]) is not None and closed)
    t.check(ok, f"{name}: want one {status} then close; got {len(rs)} response(s) "
                f"{[r[0] for r in rs]} closed={closed}: {got[:300]!r}")
    return rs


# the limits are options, documented in --help, and checked
h = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=60)
for opt in ["--header-timeout", "--body-timeout", "--max-conns", "--max-conns-per-client"]:
    t.check(h.returncode == 0 and opt in h.stdout, f"serve --help documents {opt}")
for opt in ["--header-timeout", "--body-timeout", "--max-conns", "--max-conns-per-client"]:
    p = subprocess.run([binary, "serve", model, opt, "0"], capture_output=True, text=True,
                       timeout=60)
    t.check(p.returncode == 2 and opt in p.stderr and "outside" in p.stderr,
            f"serve {opt} 0 -> exit {p.returncode}: {p.stderr.strip()}")

srv = Server(binary, model, "--api-key", KEY, "--timeout", "5", "--header-timeout", "2",
             "--body-timeout", "2", "--max-seqs", "8")
solo = srv.json("POST", "/v1/completions", REQ, {"Authorization": "Bearer " + KEY})
t.check(solo[0] == 200, f"a plain completion: {solo}")
solo_text = solo[1]["choices"][0]["text"] if solo[0] == 200 else None

# ---- request smuggling: refused with 400, connection closed ----------------------------------
SMUGGLED = b"GET /v1/nothing-smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + AUTH
chunked_body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
refused_once("Content-Length with Transfer-Encoding",
             head + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(chunked_body)
             + chunked_body + SMUGGLED)
refused_once("Transfer-Encoding before Content-Length",
             head + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunked_body
             + SMUGGLED)
refused_once("two Content-Length fields",
             head + b"Content-Length: 2\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY + SMUGGLED)
refused_once("equal Content-Length fields",
             head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(BODY), len(BODY))
             + BODY + SMUGGLED)
refused_once("a Content-Length list", head + b"Content-Length: %d, %d\r\n\r\n"
             % (len(BODY), len(BODY)) + BODY + SMUGGLED)
refused_once("a space before the colon",
             head + b"Content-Length : %d\r\n\r\n" % len(BODY) + BODY + SMUGGLED)
refused_once("a tab before the colon",
             head + b"Transfer-Encoding\t: chunked\r\n\r\n" + chunked_body + SMUGGLED)
refused_once("obsolete line folding",
             head + b"X-Folded: a\r\n b\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
for te in [b"identity", b"gzip, chunked", b"chunked, gzip", b"chunked, chunked", b"xchunked",
           b"chunked;q=1"]:
    refused_once(f"Transfer-Encoding: {te.decode()}",
                 head + b"Transfer-Encoding: " + te + b"\r\n\r\n" + chunked_body + SMUGGLED)
refused_once("two Transfer-Encoding fields",
             head + b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_body)
refused_once("Transfer-Encoding in HTTP/1.0",
             b"POST /v1/completions HTTP/1.0\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n\r\n"
             + chunked_body)
refused_once("HTTP/1.1 without Host", b"GET /health HTTP/1.1\r\n\r\n")
refused_once("two Host fields", b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
refused_once("a bare LF", b"GET /health HTTP/1.1\nHost: a\n\n")
refused_once("a NUL in a field", b"GET /health HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n")
refused_once("a control character in the target", b"GET /v1/\x01 HTTP/1.1\r\nHost: a\r\n\r\n")
refused_once("a malformed request line", b"GET  /health HTTP/1.1\r\nHost: a\r\n\r\n")
refused_once("HTTP/2.0", b"GET /health HTTP/2.0\r\nHost: a\r\n\r\n", 505)
refused_once("an unknown expectation", b"GET /health HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n",
             417)
refused_once("a head larger than 16 KiB",
             b"GET /health HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431)

# ---- bad lengths: one answer, sent once ------------------------------------------------------
for cl, status in [(b"-1", 400), (b"+%d" % len(BODY), 400), (b"%d abc" % len(BODY), 400),
                   (b"1" + b"0" * 26, 413), (b"%d" % (2 ** 64 + len(BODY)), 413),
                   (b"0x10", 400), (b"", 400)]:
    refused_once(f"Content-Length: {cl.decode()!r}",
                 head + b"Content-Length: " + cl + b"\r\n\r\n" + BODY, status)

# ---- chunked bodies: a 60 KB extension is a 4xx JSON answer, never a 5xx -----------------------
rs = refused_once("a 60 KB chunk extension",
                  head + b"Transfer-Encoding: chunked\r\n\r\n%x;ext=%s\r\n%s\r\n0\r\n\r\n"
                  % (len(BODY), b"e" * 60000, BODY))
for name, body in [("a chunk without CRLF after its data", b"3\r\nabcX\r\n0\r\n\r\n"),
                   ("a chunk size that is not hex", b"zz\r\nabc\r\n0\r\n\r\n"),
                   ("a chunk size of 17 hex digits", b"10000000000000000\r\n"),
                   ("a bare LF in a chunked body", b"3\nabc\r\n0\r\n\r\n")]:
    refused_once(name, head + b"Transfer-Encoding: chunked\r\n\r\n" + body)
# a well-formed chunked body with extensions and a trailer is served
got, _ = exchange(head + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                  + b"5;a=b\r\n" + BODY[:5] + b"\r\n%x\r\n" % (len(BODY) - 5) + BODY[5:]
                  + b"\r\n0\r\nX-Trailer: 1\r\n\r\n", 30)
rs = parse_responses(got)
t.check(len(rs) == 1 and rs[0][0] == 200 and json.loads(rs[0][2])["choices"][0]["text"] == solo_text,
        f"a chunked body with extensions and a trailer: {got[:200]!r}")

# ---- the absolute form, escaped paths, the auth scheme ----------------------------------------
for target in [b"http://127.0.0.1/v1/completions", b"HTTP://x:80/v1/completions?a=1"]:
    got, _ = exchange(b"POST " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + AUTH
                      + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY, 30)
    rs = parse_responses(got)
    t.check(len(rs) == 1 and rs[0][0] == 200
            and json.loads(rs[0][2])["choices"][0]["text"] == solo_text,
            f"absolute form {target!r}: {got[:200]!r}")
got, _ = exchange(b"GET /v1/\xff\xfe%22\"x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
rs = parse_responses(got)
err = json_error(rs[0][2]) if rs else None
t.check(rs and rs[0][0] == 404 and err is not None and "/v1/%FF%FE%22\"x" in err["message"],
        f"404 for raw path bytes: valid UTF-8 JSON with the bytes escaped: {got[:300]!r}")
for scheme in ["bearer", "BEARER", "Bearer", "bEaReR"]:
    st, b = srv.json("POST", "/v1/completions", REQ, {"Authorization": f"{scheme} {KEY}"})
    t.check(st == 200, f"auth scheme {scheme!r}: {st} {b}")
st, b = srv.json("POST", "/v1/completions", REQ, {"Authorization": f"Basic {KEY}"})
t.check(st == 401, f"another auth scheme is refused: {st}")

# ---- keep-alive still works: pipelined requests, 100-continue ---------------------------------
got, _ = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + head
                  + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
                  + b"\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 30)
rs = parse_responses(got)
t.check([r[0] for r in rs] == [200, 200, 200], f"three pipelined requests: {got[:300]!r}")
s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
s.sendall(head + b"Expect: 100-continue\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
          % len(BODY))
cont = s.recv(100)
s.sendall(BODY)
got = cont
while True:
    c = s.recv(65536)
    if not c:
        break
    got += c
s.close()
t.check(cont.startswith(b"HTTP/1.1 100 ") and parse_responses(got)[0][0] == 200,
        f"Expect: 100-continue: {got[:200]!r}")

# ---- a refused large body is readable (http.client, 1.2 MB against 1 MiB) ----------------------
big = json.dumps({"prompt": "x" * 1200000}).encode()
for mode in ["length", "chunked"]:
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        hdrs = {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}
        if mode == "length":
            c.request("POST", "/v1/completions", body=big, headers=hdrs)
        else:
            c.request("POST", "/v1/completions", body=iter([big[i:i + 65536]
                      for i in range(0, len(big), 65536)]), headers=hdrs, encode_chunked=True)
        r = c.getresponse()
        st, data = r.status, r.read()
    except OSError as e:
        st, data = None, repr(e).encode()
    c.close()
    t.check(st == 413 and json_error(data) is not None,
            f"1.2 MB body ({mode}) against --max-body 1 MiB: the client reads 413: {st} {data[:200]!r}")

# ---- a client that leaves mid-body is one cancelled request, and its connection closes ----------
rec0, _, can0 = accounting()
s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
s.sendall(head + b"Content-Length: 100\r\n\r\n" + BODY[:10])
s.close()
time.sleep(0.3)
rec1, _, can1 = accounting()
t.check(rec1 == rec0 + 2 and can1 == can0 + 1,
        f"a body cut short: one request received (beside /metrics) and cancelled: "
        f"received {rec0} -> {rec1}, cancelled {can0} -> {can1}")

# ---- many prompt clients from one address: none is evicted for room ----------------------------
# 100 connections (over --max-conns-per-client 64) each ask once and stay
# open; a connection gets a second to send its request before it can be
# evicted, so every one is answered; later ones evict the idle ones
held = []
answered = 0
for i in range(100):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    held.append(s)
for s in held:
    try:
        answered += s.recv(4096).startswith(b"HTTP/1.1 200 ")
    except OSError:
        pass
t.check(answered == 100, f"100 prompt connections from one address: {answered} answered")
time.sleep(1.2)
evicted0 = srv.metric('piecewise_connections_dropped_total{reason="evicted"}')
for i in range(5):
    t.check(srv.json("GET", "/health")[0] == 200, "a new connection beside 100 idle ones")
t.check(srv.metric('piecewise_connections_dropped_total{reason="evicted"}') >= evicted0 + 5,
        "idle connections over the per-address cap were evicted for new ones")
for s in held:
    s.close()

# ---- deadlines from the first byte, not the last --------------------------------------------
# --header-timeout 2, --timeout 5: a head dribbled a byte every 0.5 s is cut after about 2 s
drops0 = srv.metric('piecewise_connections_dropped_total{reason="header_timeout"}')
msg = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
t0 = time.monotonic()
closed_at = None
for i in range(len(msg)):
    try:
        s.sendall(msg[i:i + 1])
    except OSError:
        closed_at = time.monotonic() - t0
        break
    r, _, _ = select.select([s], [], [], 0.5)
    if r:
        try:
            data = s.recv(100)
        except OSError:
            data = b""
        if not data:
            closed_at = time.monotonic() - t0
            break
s.close()
t.check(closed_at is not None and 1.5 < closed_at < 4,
        f"a dribbled head is cut at --header-timeout: closed after {closed_at}")
t.check(srv.metric('piecewise_connections_dropped_total{reason="header_timeout"}') > drops0,
        "header timeouts counted")
# --body-timeout 2: a body dribbled a byte every 0.5 s gets 408 after about 2 s
s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
s.sendall(head + b"Content-Length: %d\r\n\r\n" % len(BODY))
t0 = time.monotonic()
got = b""
for i in range(len(BODY)):
    try:
        s.sendall(BODY[i:i + 1])
    except OSError:
        break
    r, _, _ = select.select([s], [], [], 0.5)
    if r:
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        got += data
        if not data or b"\r\n\r\n" in got:
            break
took = time.monotonic() - t0
s.close()
rs = parse_responses(got)
t.check(rs and rs[0][0] == 408 and 1.5 < took < 4,
        f"a dribbled body gets 408 at --body-timeout: after {took:.1f} s: {got[:200]!r}")
t.check(srv.alive(), "server alive after the framing cases")
t.check(srv.terminate() == 0, "exit 0")

# ---- a flood of slow clients from one address does not keep normal requests out ---------------
# 1,100 connections (more than the server's 1,024) each send a byte of a head
# every second; normal requests from the same address still get through.
N_SLOW = 1100
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and hard < N_SLOW + 200:
    N_SLOW = max(200, hard - 200)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, N_SLOW + 200)), hard))
srv = Server(binary, model, "--timeout", "5", "--header-timeout", "8")
slow = []
stop = threading.Event()


def flood():
    rng = random.Random(1)
    for _ in range(N_SLOW):
        try:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", srv.port))
            slow.append(s)
        except OSError:
            pass
    k = 0
    while not stop.is_set():
        for s in list(slow):
            try:
                s.send(b"P" if k == 0 else b"O")
            except OSError:
                slow.remove(s)
                s.close()
                # reconnect, as a flood would
                try:
                    n = socket.socket()
                    n.setblocking(False)
                    n.connect_ex(("127.0.0.1", srv.port))
                    slow.append(n)
                except OSError:
                    pass
        k += 1
        stop.wait(1.0 + rng.random() * 0.1)


fl = threading.Thread(target=flood, daemon=True)
fl.start()
time.sleep(3)
ok_count = 0
t0 = time.monotonic()
for i in range(8):
    try:
        st, b = srv.json("POST", "/v1/completions", REQ, timeout=10)
        ok_count += st == 200 and b["choices"][0]["text"] == solo_text
    except OSError:
        pass
took = time.monotonic() - t0
evicted = srv.metric('piecewise_connections_dropped_total{reason="evicted"}')
stop.set()
fl.join(10)
for s in slow:
    s.close()
print(f"{N_SLOW} slow clients: 8 normal requests in {took:.1f} s, {evicted:.0f} evicted")
t.check(ok_count == 8 and took < 15,
        f"{N_SLOW} slow clients: {ok_count} of 8 normal requests answered in {took:.1f} s")
t.check(evicted and evicted > 0, f"slow connections were evicted: {evicted}")
t.check(srv.alive(), "server alive after the flood")

# ---- metrics: received = answered + cancelled, under load --------------------------------------


def load_client(i):
    rng = random.Random(i)
    for k in range(6):
        what = rng.choice(["plain", "stream", "stream_cut", "plain_cut", "bad", "404"])
        try:
            if what in ("plain", "bad", "404"):
                path = "/v1/nothing" if what == "404" else "/v1/completions"
                srv.json("POST", path, REQ if what == "plain" else b"{bad", timeout=60)
                continue
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
            body = json.dumps(dict(REQ, max_tokens=srv.ctx - 16 if what.endswith("cut") else 12,
                                   stream=what.startswith("stream"))).encode()
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            if what == "stream_cut":
                s.recv(100)
            elif what == "plain_cut":
                time.sleep(0.05)
            else:
                while s.recv(65536):
                    pass
            s.close()
        except OSError:
            pass


ths = [threading.Thread(target=load_client, args=(i,)) for i in range(24)]
for th in ths:
    th.start()
for th in ths:
    th.join(120)
alive = deadline(30)
while alive() and srv.metric("piecewise_requests_running") != 0:
    time.sleep(0.1)
time.sleep(0.3)
received, answered, cancelled = accounting()
# the /metrics request reading these is received and not yet answered
t.check(None not in (received, answered, cancelled) and received - 1 == answered + cancelled,
        f"received {received} - 1 == answered {answered} + cancelled {cancelled}")
t.check(cancelled and cancelled > 0, f"some requests were cancelled: {cancelled}")
t.check(srv.terminate() == 0, "exit 0")

# ---- random framing never crashes, hangs or changes another client's answer --------------------
srv = Server(binary, model, "--timeout", "2", "--header-timeout", "2", "--body-timeout", "2",
             "--max-body", "4096")
PIECES = [b"POST /v1/completions HTTP/1.1\r\n", b"GET /health HTTP/1.0\r\n", b"Host: x\r\n",
          b"Content-Length: 20\r\n", b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n",
          b"Transfer-Encoding: gzip\r\n", b"Connection: close\r\n", b"Expect: 100-continue\r\n",
          b"X: \x00\x7f\xff\r\n", b"Bad Field: 1\r\n", b"\r\n", b"\n", b"\r", b"0\r\n\r\n",
          b"5;x=y\r\nhello\r\n", b"ffffffff\r\n", b"{\"prompt\": \"hi\"}", b" ", b":", b"\t"]
fuzz_answers = []
ref_stop = threading.Event()


def reference():
    while not ref_stop.is_set():
        try:
            st, b = srv.json("POST", "/v1/completions", REQ, timeout=30)
            fuzz_answers.append(b["choices"][0]["text"] if st == 200 else f"status {st}")
        except (OSError, ValueError, KeyError) as e:
            fuzz_answers.append(f"error {e}")


ref = threading.Thread(target=reference, daemon=True)
ref.start()
slowest = [0.0]
n_cases = [0]
bad_answers = []


def fuzz_worker(seed):
    rng = random.Random(seed)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        data = b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.3:
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                if b:
                    b[rng.randrange(len(b))] = rng.randrange(256)
            data = bytes(b)
        t0 = time.monotonic()
        try:
            got, closed = exchange(data, 12)
        except OSError as e:
            bad_answers.append((data, f"connect: {e}"))
            continue
        slowest[0] = max(slowest[0], time.monotonic() - t0)
        for st, hd, body in parse_responses(got):
            if st is not None and not (st < 500 and (st == 200 or json_error(body) is not None)):
                bad_answers.append((data, st, body[:120]))
        n_cases[0] += 1


workers = [threading.Thread(target=fuzz_worker, args=(26 + i,)) for i in range(16)]
for w in workers:
    w.start()
for w in workers:
    w.join(60)
t.check(not bad_answers, f"random requests got a 5xx or a non-JSON error: {bad_answers[:3]}")
ref_stop.set()
ref.join(30)
t.check(srv.alive(), f"server alive after {n_cases[0]} random requests")
# head 2 s + body 2 s + an idle kept-alive connection 2 s, and a margin
t.check(slowest[0] < 9, f"every random request ended within its deadlines: slowest {slowest[0]:.1f} s")
t.check(fuzz_answers and all(a == solo_text for a in fuzz_answers),
        f"the reference client's answers never changed: {set(fuzz_answers)}")
t.check(srv.json("GET", "/health")[0] == 200, "healthy after the random requests")
t.check(srv.terminate() == 0, "exit 0")
t.finish()
