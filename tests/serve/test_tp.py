"""piecewise serve and chat with tensor parallelism (--tp 2 under mpirun):
 - greedy answers over HTTP, several requests at once (mixed prefill and
   decode steps), seeded sampled ones (n = 2), one with logit_bias and
   penalties, and one whose client leaves mid-stream, equal bit for bit to
   `serve --tp 1`'s: on stories260K in
   modes none, piecewise and full, and on SmolLM2 (completions and chat) in
   none and auto (PIECEWISE and FULL steps, counted in /metrics);
 - an idle job: both ranks sleep (their CPU time over 3 idle seconds);
 - the watchdog: a follower stopped with SIGSTOP ends the job within the
   --tp-timeout, with "rank 1 did not answer" on rank 0 and a non-zero exit;
 - a follower killed while serving ends the job with a non-zero exit;
 - `chat --tp 2` with scripted input prints what `chat --tp 1` prints;
 - bad combinations and values, and a port rank 0 cannot listen on: clear
   errors, and the job ends.
Skips (77) in a build without MPI or without mpirun.
Usage: test_tp.py PIECEWISE TINY_MODEL_TOOL WORKDIR"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_lib import SKIP, Checks, Server, deadline, smollm_model, sse_events, stories_model  # noqa: E402,E501

binary, tiny_tool, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
t = Checks("serve_tp")
# Open MPI keeps allocations until exit, which a sanitizer build's leak
# check would report as the program's (the split is leak-checked elsewhere)
os.environ["ASAN_OPTIONS"] = ":".join(
    x for x in (os.environ.get("ASAN_OPTIONS"), "detect_leaks=0") if x)
stories = stories_model()


def run(*args, stdin="", timeout=300):
    p = subprocess.run(args, input=stdin, capture_output=True, text=True, errors="replace",
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# ---- can this build and machine run it at all ------------------------------------------
probe = stories or smollm_model()
if not probe:
    print("SKIP: neither stories260K nor SmolLM2 is here")
    sys.exit(SKIP)
rc, out, err = run(binary, "run", probe, "-p", "hi", "-n", "1", "-q", "--tp", "2")
if "this build has no MPI" in err:
    t.check("apt-get install libopenmpi-dev openmpi-bin" in err,
            f"--tp without MPI says how to get it: {err}")
    print("SKIP: this build has no MPI")
    sys.exit(SKIP if not t.failures else 1)
if not shutil.which("mpirun"):
    print("SKIP: mpirun not found (apt-get install openmpi-bin)")
    sys.exit(SKIP)

PIDS = os.path.join(workdir, "rank-pid")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]


def mpirun():
    """MPIRUN, each rank writing its pid to PIDS.<rank> first."""
    return [*MPIRUN, "sh", "-c", f'echo $$ > "{PIDS}.$OMPI_COMM_WORLD_RANK"; exec "$0" "$@"']


def rank_pid(r):
    with open(f"{PIDS}.{r}") as f:
        return int(f.read())


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def serve_tp(model, *args):
    for r in (0, 1):
        if os.path.exists(f"{PIDS}.{r}"):
            os.unlink(f"{PIDS}.{r}")
    return Server(binary, model, "--tp", "2", *args, launcher=mpirun())


def answer(srv, path, body):
    st, j = srv.json("POST", path, body, timeout=300)
    if st != 200:
        return f"<HTTP {st}: {j}>"
    return "|".join(ch["text"] if "text" in ch else ch["message"]["content"]
                    for ch in j["choices"])


def leave_midstream(srv, body):
    """A streamed request whose client reads two events and goes away."""
    c = srv.conn(300)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    sse_events(r, limit=2)
    c.close()


def answers(srv, requests, leaver=None):
    """Every request at once (threads), plus one client that leaves
    mid-stream; the answers in request order."""
    out = [None] * len(requests)

    def one(i):
        out[i] = answer(srv, *requests[i])

    ths = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    if leaver:
        ths.append(threading.Thread(target=leave_midstream, args=(srv, leaver)))
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    # after the leaver's cancellation, the first request alone again
    out.append(answer(srv, *requests[0]))
    return out


def stop(srv):
    """SIGTERM to rank 0: it finishes, the followers follow it out, and
    mpirun exits with their status (a signal to mpirun itself kills them)."""
    os.kill(rank_pid(0), signal.SIGTERM)
    try:
        return srv.proc.wait(60)
    except subprocess.TimeoutExpired:
        return None


def steps(srv, mode):
    return srv.metric(f'piecewise_engine_steps_total{{mode="{mode}"}}') or 0


def compare(name, model, requests, modes, leaver):
    ref_srv = Server(binary, model, "--tp", "1")
    ref = answers(ref_srv, requests)
    ref_srv.terminate()
    t.check(all(a and not a.startswith("<HTTP") for a in ref), f"{name} --tp 1 answers: {ref}")
    for mode, want_steps in modes:
        srv = serve_tp(model, "--mode", mode, "--max-batched-tokens", "32")
        got = answers(srv, requests, leaver)
        for i, (a, b) in enumerate(zip(got, ref)):
            t.check(a == b, f"{name} --tp 2 --mode {mode}, request {i}: {a!r} != --tp 1 {b!r}")
        for m in want_steps:
            t.check(steps(srv, m) > 0, f"{name} --mode {mode}: no {m} steps")
        if not idle_checked:
            idle_cpu(srv)
        rc = stop(srv)
        t.check(rc == 0, f"{name} --tp 2 --mode {mode}: SIGTERM to rank 0 -> exit {rc}")
        print(f"{name} --mode {mode}: {len(got)} answers equal to --tp 1", flush=True)


idle_checked = False


def idle_cpu(srv):
    """The ranks of an idle job sleep: under 10% of a core each over 3 s."""
    global idle_checked
    idle_checked = True
    time.sleep(1)
    pids = [rank_pid(0), rank_pid(1)]
    a = [cpu_ticks(p) for p in pids]
    time.sleep(3)
    for r, pid in enumerate(pids):
        used = (cpu_ticks(pid) - a[r]) / os.sysconf("SC_CLK_TCK")
        print(f"idle rank {r}: {used:.3f} s of CPU in 3 s", flush=True)
        t.check(used < 0.3, f"idle rank {r} used {used:.2f} s of CPU in 3 s")


# ---- the same answers at --tp 1 and 2 ----------------------------------------------------
if stories:
    reqs = [("/v1/completions", {"prompt": p, "max_tokens": n, "temperature": 0})
            for p, n in [("Once upon a time", 40), ("The cat", 25), ("Lily went to the park and", 9),
                         ("One day a big dog", 33)]]
    reqs.append(("/v1/completions", {"prompt": "Tom had a ball", "max_tokens": 30,
                                     "temperature": 0.9, "top_k": 40, "seed": 11, "n": 2}))
    reqs.append(("/v1/completions", {"prompt": "The dog", "max_tokens": 24, "temperature": 0,
                                     "logit_bias": {"13": -100, "300": 3},
                                     "presence_penalty": 0.5, "frequency_penalty": 0.25}))
    leaver = {"prompt": "The sun was", "max_tokens": 200, "temperature": 0}
    compare("stories260K", stories, reqs,
            [("none", ["none"]), ("piecewise", ["piecewise"]), ("full", ["full"])], leaver)
else:
    t.skip_part("stories260K.gguf not found (PW_SHARED_DIR)")

smollm = smollm_model()
if smollm:
    reqs = [("/v1/chat/completions", {"messages": [{"role": "user", "content": q}],
                                      "max_tokens": n, "temperature": 0})
            for q, n in [("What is the capital of France?", 20), ("Write a haiku about the sea.", 28)]]
    reqs.append(("/v1/completions", {"prompt": "The three primary colors are", "max_tokens": 16,
                                     "temperature": 0}))
    compare("SmolLM2", smollm, reqs, [("none", ["none"]), ("auto", ["piecewise", "full"])], None)
else:
    t.skip_part("SmolLM2 not found (models/)")

model = stories or smollm

# ---- a stopped follower: the watchdog ends the job ---------------------------------------
srv = serve_tp(model, "--tp-timeout", "2")
os.kill(rank_pid(1), signal.SIGSTOP)
t0 = time.monotonic()
try:
    srv.json("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 20, "temperature": 0},
             timeout=60)
except OSError:
    pass  # the job ended while the request was in flight
try:
    rc = srv.proc.wait(60)
except subprocess.TimeoutExpired:
    rc = None
took = time.monotonic() - t0
log = "".join(srv.log)
t.check(rc not in (None, 0), f"a stopped follower: exit {rc} after {took:.0f} s")
t.check(took < 30, f"a stopped follower ended the job after {took:.0f} s (limit 2 s)")
t.check("tensor parallel rank 0 of 2: rank 1 did not answer within 2 s" in log,
        f"a stopped follower is named on rank 0: {log[-2000:]}")
srv.kill()

# ---- a killed follower ends the job ---------------------------------------------------------
srv = serve_tp(model, "--tp-timeout", "5")
errors = []


def busy():
    try:
        srv.json("POST", "/v1/completions",
                 {"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0}, timeout=60)
    except OSError as e:
        errors.append(e)


th = threading.Thread(target=busy)
th.start()
time.sleep(0.3)
t0 = time.monotonic()
os.kill(rank_pid(1), signal.SIGKILL)
try:
    rc = srv.proc.wait(60)
except subprocess.TimeoutExpired:
    rc = None
took = time.monotonic() - t0
th.join(70)
t.check(rc not in (None, 0), f"a killed follower: exit {rc} after {took:.0f} s")
t.check(took < 30, f"a killed follower ended the job after {took:.0f} s")
gone = deadline(20)
while running(rank_pid(0)) and gone():
    time.sleep(0.1)
t.check(not running(rank_pid(0)), "rank 0 still runs 20 s after a follower was killed")
srv.kill()

# ---- chat --tp 2 with scripted input ----------------------------------------------------------
# SmolLM2's template, and a tiny random model's (whose template cannot add a
# turn, so each turn after the first starts a new conversation)
tiny_chat = os.path.join(workdir, "tiny_chat.gguf")
subprocess.run([tiny_tool, tiny_chat,
                "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"],
               check=True, timeout=60)
for chat_model in [m for m in (smollm, tiny_chat) if m]:
    name = os.path.basename(chat_model)
    script = "What is 2 + 2?\nAnd 3 + 3?\n/reset\nName a color.\n"
    rc1, ref, err1 = run(binary, "chat", chat_model, "-n", "16", "--tp", "1", stdin=script)
    rc2, out, err2 = run("timeout", "300", *MPIRUN, binary, "chat", chat_model, "-n", "16",
                         "--tp", "2", stdin=script)
    t.check(rc1 == 0 and ref.count("(new conversation)") == 1, f"chat {name} --tp 1: {rc1} {err1}")
    t.check(rc2 == 0 and out == ref,
            f"chat {name} --tp 2 -> {rc2}:\n{out}\n---\n{ref}\n{err2[-1500:]}")
if not smollm:
    t.skip_part("chat --tp 2 with SmolLM2's chat template")


# ---- bad combinations and values -------------------------------------------------------------
def expect_fail(what, args, code, text, launch=()):
    rc, _, err = run(*launch, binary, *args, timeout=120)
    t.check(rc == code if code else rc != 0, f"{what}: exit {rc} (want {code or 'non-zero'})")
    t.check(text in err, f"{what}: stderr lacks {text!r}: {err[-1500:]}")


expect_fail("--tp-timeout 0", ["serve", model, "--tp", "2", "--tp-timeout", "0"], 2,
            "0 is outside [1, 86400]")
expect_fail("--tp-timeout x", ["chat", model, "--tp-timeout", "x"], 2, "--tp-timeout")
expect_fail("serve --tp 2 alone", ["serve", model, "--tp", "2", "--port", "0"], 1,
            "--tp 2 but MPI started 1 process")
expect_fail("chat --tp 2 alone", ["chat", model, "--tp", "2"], 1,
            "--tp 2 but MPI started 1 process")
expect_fail("serve --tp 2 --graph-cache",
            ["serve", model, "--tp", "2", "--port", "0", "--graph-cache", workdir], 0,
            "--graph-cache is not supported with --tp 2", launch=["timeout", "120", *MPIRUN])

# rank 0 cannot listen: the error, and the followers end with it
taken = socket.socket()
taken.bind(("127.0.0.1", 0))
taken.listen()
expect_fail("serve --tp 2 on a port in use",
            ["serve", model, "--tp", "2", "--port", str(taken.getsockname()[1])], 0,
            "cannot listen on 127.0.0.1 port", launch=["timeout", "120", *MPIRUN])
taken.close()

t.finish()
