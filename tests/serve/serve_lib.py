"""Shared by the serve tests: start `piecewise serve` on 127.0.0.1 with a
free port (--port 0; the server prints the one it bound), talk raw HTTP,
and make sure every server started is killed when the test exits.

Standard library only, so the raw-HTTP tests need no virtualenv."""
import atexit
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

SKIP = 77
_servers = []


def _kill_all():
    for s in _servers:
        died = s.proc.poll()
        s.kill()
        # a server that exited on its own with an error: show why
        if died not in (None, 0):
            print(f"server {' '.join(s.args[2:])} exited {died}; its log ends:\n"
                  + "".join(s.log[-40:]), flush=True)


atexit.register(_kill_all)


class Checks:
    """Collects failures so one run reports every broken check. A part that
    cannot run (its model is missing) is recorded with skip_part, and the test
    then ends as a skip (77), never a pass; a test that checked nothing fails."""

    def __init__(self, name):
        self.name = name
        self.failures = 0
        self.checks = 0
        self.skipped = 0

    def check(self, cond, what):
        self.checks += 1
        if not cond:
            self.failures += 1
            print(f"FAIL: {what}", flush=True)
        return cond

    def skip_part(self, what):
        self.skipped += 1
        print(f"SKIP (part): {what}", flush=True)

    def finish(self):
        if self.failures:
            print(f"{self.name}: {self.failures} of {self.checks} check(s) failed")
            sys.exit(1)
        if self.skipped:
            print(f"SKIP: {self.name}: {self.checks} checks passed, {self.skipped} part(s) skipped")
            sys.exit(SKIP)
        if not self.checks:
            print(f"{self.name}: no checks were made")
            sys.exit(1)
        print(f"{self.name}: all {self.checks} checks passed")
        sys.exit(0)


def shared_dir():
    src = os.environ.get("PW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    return os.environ.get("PW_SHARED_DIR", os.path.join(src, "..", "shared"))


def stories_model():
    p = os.path.join(shared_dir(), "models", "stories260K.gguf")
    return p if os.path.isfile(p) else None


def smollm_model():
    """The fetched SmolLM2 (PW_SMOLLM2_GGUF names another copy), or None."""
    src = os.environ.get("PW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    p = os.environ.get("PW_SMOLLM2_GGUF",
                       os.path.join(src, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    return p if os.path.isfile(p) else None


def raw_model(tiny_tool, workdir):
    """stories260K when present, else a tiny random GGUF written by tiny_tool."""
    p = stories_model()
    if p:
        return p
    out = os.path.join(workdir, "serve_tiny.gguf")
    subprocess.run([tiny_tool, out], check=True, timeout=60)
    print("stories260K.gguf not found: using a tiny random model")
    return out


def session_pids(sid):
    """Every process of session sid (a launcher's ranks are in it)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            pids.append(int(d))
    return pids


class Server:
    """launcher: a command the server runs under (mpirun ...); the server and
    every process it starts then form a session of their own, all killed
    together."""

    def __init__(self, binary, model, *args, startup_timeout=300, launcher=()):
        self.args = [*launcher, binary, "serve", model, "--host", "127.0.0.1", "--port", "0", *args]
        self.session = bool(launcher)
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, errors="replace", start_new_session=self.session)
        _servers.append(self)
        self.log = []
        self.port = None
        self.ctx = None
        ready = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r" on http://127\.0\.0\.1:(\d+) .*context (\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    self.ctx = int(m.group(2))
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=drain, daemon=True)
        self._reader.start()
        if not ready.wait(startup_timeout) or self.port is None:
            self.kill()
            raise RuntimeError("server did not start: " + "".join(self.log[-20:]))

    def conn(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict, body bytes). body: dict -> JSON, bytes/str as is."""
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def json(self, method, path, body=None, headers=None, timeout=120):
        st, hd, data = self.request(method, path, body, headers, timeout)
        try:
            return st, json.loads(data)
        except ValueError:
            return st, {"_raw": data.decode("utf-8", "replace")}

    def metric(self, name):
        """The value of the sample whose name (with labels) is exactly name."""
        for line in self.metrics_text().splitlines():
            if not line.startswith("#") and line.rsplit(" ", 1)[0] == name:
                return float(line.rsplit(" ", 1)[1])
        return None

    def metrics_text(self):
        return self.request("GET", "/metrics")[2].decode()

    def alive(self):
        return self.proc.poll() is None

    def terminate(self, timeout=60):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.session:
            for pid in session_pids(self.proc.pid):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


def sse_events(resp, limit=100000):
    """The data: payloads of a server-sent-event response, in order."""
    out = []
    buf = b""
    while len(out) < limit:
        line = resp.readline()
        if not line:
            break
        line = line.rstrip(b"\r\n")
        if line.startswith(b"data: "):
            out.append(line[6:].decode())
            if out[-1] == "[DONE]":
                break
    return out


def stream_text(events):
    text = ""
    for e in events:
        if e == "[DONE]":
            break
        j = json.loads(e)
        for ch in j.get("choices", []):
            if "text" in ch:
                text += ch["text"]
            else:
                text += ch.get("delta", {}).get("content") or ""
    return text


def deadline(seconds):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() < end
