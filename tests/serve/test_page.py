"""The chat page at / in a real browser: headless Chromium driven over the
DevTools protocol (websocket-client). Against a server with --api-key and a
tiny chat model, it checks that the page loads without a policy violation,
asks for the key and then uses it, sends a message, streams the answer
(text/event-stream) into the DOM as text, keeps the conversation for the
next turn, shows tokens/s, and it saves a screenshot as a test artefact
(WORKDIR/chat-page.png). Skips (77) where Chromium is not installed.
Usage: test_page.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import SKIP, Checks, Server  # noqa: E402

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(b)), None)
if not browser:
    print("SKIP: serve_page: no chromium (scripts/install-deps.sh installs it)")
    sys.exit(SKIP)
try:
    import websocket  # websocket-client
except ImportError:
    print("SKIP: serve_page: websocket-client is not installed (scripts/serve-test-venv.sh)")
    sys.exit(SKIP)

t = Checks("serve_page")
TEMPLATE = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
model = os.path.join(workdir, "tiny_chat.gguf")
subprocess.run([tiny_tool, model, TEMPLATE], check=True, timeout=60)
KEY = "page-key"
srv = Server(binary, model, "--max-seqs", "4", "--api-key", KEY)
page_url = f"http://127.0.0.1:{srv.port}/"


class DevTools:
    """A page target over the DevTools protocol: commands, and the events
    that arrive meanwhile (kept in self.events)."""

    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, seconds=60):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.1)
        return None


profile = tempfile.mkdtemp(prefix="pw-chromium-", dir=workdir)
args = [browser, "--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--no-default-browser-check", "--disable-extensions", "--remote-debugging-port=0",
        "--remote-allow-origins=*", f"--user-data-dir={profile}", "--window-size=900,900",
        # the sandbox refuses to run as root and needs user namespaces that CI
        # containers often lack; the browser only opens this test's own page
        "--no-sandbox", "about:blank"]
chrome = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          errors="replace")
try:
    port_file = os.path.join(profile, "DevToolsActivePort")
    end = time.monotonic() + 60
    while not os.path.exists(port_file) and time.monotonic() < end and chrome.poll() is None:
        time.sleep(0.1)
    if not os.path.exists(port_file):
        chrome.kill()
        print("chromium did not start:", chrome.stderr.read()[-2000:])
        sys.exit(1)
    time.sleep(0.2)
    with open(port_file) as f:
        dt_port = int(f.readline())
    with urllib.request.urlopen(f"http://127.0.0.1:{dt_port}/json/list", timeout=30) as r:
        targets = json.load(r)
    target = next(x for x in targets if x.get("type") == "page")
    dt = DevTools(target["webSocketDebuggerUrl"])
    for domain in ("Page", "Runtime", "Network", "Log"):
        dt.call(f"{domain}.enable")
    dt.call("Page.navigate", url=page_url)
    t.check(dt.wait("document.readyState === 'complete' && !!document.getElementById('send')"),
            "the page loads")
    # --api-key: the page finds /v1/models refused and asks for the key
    t.check(dt.wait("!document.getElementById('key-form').hidden"), "the page asks for the key")
    dt.eval("document.getElementById('key').value = 'wrong'; "
            "document.getElementById('key-save').click(); true")
    t.check(dt.wait("document.getElementById('error').textContent.includes('refused')"),
            "a wrong key is reported")
    dt.eval(f"document.getElementById('key').value = {json.dumps(KEY)}; "
            "document.getElementById('key-save').click(); true")
    t.check(dt.wait("document.getElementById('key-form').hidden && "
                    "document.getElementById('model').textContent.length > 0"),
            "with the key the page reads the model's name")

    def ask(text):
        dt.eval("document.getElementById('temperature').value = '0'; "
                "document.getElementById('max-tokens').value = '16'; "
                f"document.getElementById('input').value = {json.dumps(text)}; "
                "document.getElementById('send').click(); true")
        n = dt.wait(f"(() => {{ const a = document.querySelectorAll('.msg.assistant'); "
                    f"return a.length && !a[a.length - 1].classList.contains('streaming') && "
                    f"!document.getElementById('send').disabled ? a.length : 0 }})()", 120)
        return n, dt.eval("(() => { const a = document.querySelectorAll('.msg.assistant'); "
                          "return a.length ? a[a.length - 1].textContent : null })()")

    def api_answer(messages):
        st, r = srv.json("POST", "/v1/chat/completions",
                         {"messages": messages, "temperature": 0, "max_tokens": 16},
                         {"Authorization": f"Bearer {KEY}"})
        return r["choices"][0]["message"]["content"] if st == 200 else None

    q1 = "Hello <b>there</b> & <script>alert(1)</script>"
    n, a1 = ask(q1)
    want1 = api_answer([{"role": "user", "content": q1}])
    t.check(n == 1 and want1 and a1 == want1,
            f"the streamed answer is in the DOM, as the API gives it: {a1!r} vs {want1!r}")
    t.check(dt.eval("document.querySelector('.msg.user').textContent") == q1
            and dt.eval("document.querySelectorAll('#messages b, #messages script').length") == 0,
            "message text is text: no element made from it")
    t.check(dt.eval("document.querySelectorAll('#messages *').length === "
                    "document.querySelectorAll('#messages > .msg').length"),
            "the messages hold nothing but their text")
    stats = dt.eval("document.getElementById('stats').textContent")
    t.check(stats and "tokens/s" in stats, f"tokens/s shown: {stats!r}")

    q2 = "And then?"
    n, a2 = ask(q2)
    conv = [{"role": "user", "content": q1}, {"role": "assistant", "content": a1},
            {"role": "user", "content": q2}]
    want2 = api_answer(conv)
    t.check(n == 2 and a2 == want2, f"the second turn answers the whole conversation: {a2!r} vs {want2!r}")

    # what the browser sent and got: streamed, with the key, the conversation kept
    sent = [e["params"]["request"] for e in dt.events if e["method"] == "Network.requestWillBeSent"
            and e["params"]["request"]["url"].endswith("/v1/chat/completions")]
    bodies = [json.loads(r.get("postData", "{}")) for r in sent]
    t.check(len(bodies) == 2 and all(b.get("stream") is True for b in bodies)
            and bodies[1].get("messages") == conv
            and all(r["headers"].get("Authorization") == f"Bearer {KEY}" for r in sent),
            f"the page streams, sends the key and keeps the conversation: {bodies}")
    got = [e["params"]["response"] for e in dt.events if e["method"] == "Network.responseReceived"
           and e["params"]["response"]["url"].endswith("/v1/chat/completions")]
    t.check(len(got) == 2 and all(g["mimeType"] == "text/event-stream" and g["status"] == 200
                                  for g in got), f"answers are event streams: {got}")
    policy = [e["params"]["entry"]["text"] for e in dt.events if e["method"] == "Log.entryAdded"
              and "Content Security Policy" in e["params"]["entry"].get("text", "")]
    t.check(not policy, f"no Content-Security-Policy violation: {policy}")
    errors = [e["params"] for e in dt.events if e["method"] == "Runtime.exceptionThrown"]
    t.check(not errors, f"no script error: {errors}")

    shot = dt.call("Page.captureScreenshot", format="png")
    png = base64.b64decode(shot.get("data", ""))
    shot_path = os.path.join(workdir, "chat-page.png")
    with open(shot_path, "wb") as f:
        f.write(png)
    t.check(png.startswith(b"\x89PNG") and len(png) > 1000, f"screenshot saved: {shot_path}")
    print(f"screenshot: {shot_path}")
    dt.ws.close()
finally:
    chrome.terminate()
    try:
        chrome.wait(20)
    except subprocess.TimeoutExpired:
        chrome.kill()
    shutil.rmtree(profile, ignore_errors=True)
t.check(srv.terminate() == 0, "exit 0 on SIGTERM")
t.finish()
