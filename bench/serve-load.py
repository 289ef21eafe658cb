#!/usr/bin/env python3
"""Load benchmark for an OpenAI-compatible server (piecewise serve, or
llama.cpp's llama-server): N concurrent streaming clients send chat
requests back to back for a fixed time. Prints aggregate generated tok/s
and p50/p99 time to first token and inter-token latency.

  bench/serve-load.py --url http://127.0.0.1:8080 --clients 4 --seconds 30

Standard library only. Tokens are counted from the usage the server
reports (stream_options.include_usage), else one per content chunk.

Workloads (--workload): "plain" sends short chat questions; "shared-prompt"
is a chat service: every request starts with the same system prompt of
about --system-tokens tokens (default 1000), followed by the client's own
question. Before the load it measures the time to first token of a first
request alone (the system prompt computed) and of a second one alone with
another question (the system prompt cached, by a server that caches
prefixes), and reports both and their ratio. "unique-prompt" gives every
request a system prompt of its own of that size (nothing to share: a
prefix cache's worst case, and the quickest way to write every KV block
once). --cache-prompt adds
"cache_prompt": true to every request (llama-server's prompt cache switch;
piecewise ignores it: its prefix cache is on unless --no-prefix-cache).

A fixed set of requests instead of a time: --requests N sends requests 0..N-1
(request k from client k mod --clients, with question k), greedy, and
--record FILE writes each request's answer to FILE (a JSON list by k), so
that two servers, or one with and without a cache, can be compared answer
for answer (bench/serve-prefix-check.sh).

Every timed run ends by --deadline seconds (default: --seconds plus the
larger of 60 and --seconds; none for --requests): requests still streaming then are closed and
counted as "unfinished" (their tokens so far still count), so a server that
stalls (llama-server's per-operation thread barriers crawl when its threads
cannot all run at once on a loaded machine) still gives a figure instead of
a hung benchmark. The load average at the start and end is reported, since
figures taken on a busy machine mean little.

Soak options: --disconnect-rate P makes a client close its connection
mid-stream (after a random number of content chunks) with probability P
per request; those requests are counted as "disconnected", not as errors.
--rss-pid PID samples VmRSS from /proc/PID/status every --rss-every
seconds and reports the first, middle and last samples and the peak, and
the CPU seconds that process used during the load and per generated token
(a figure that holds up better than tok/s on a machine shared with other
work)."""
import argparse
import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.parse

PROMPTS = [
    "Tell me a short story about a cat.",
    "Explain why the sky is blue.",
    "Write a haiku about the sea.",
    "What are three uses of a paperclip?",
]


# The shared system prompt: deterministic prose from a small vocabulary,
# the same on every run but for a nonce at its start (so that a run starts
# with nothing cached), sized by words to about the requested tokens.
WORDS = ("the a service customer order account payment delivery product support team help "
         "answer question policy refund return week day hour store online card bank time "
         "please always never only when if then before after each every first last new old "
         "small large quick careful polite clear short friendly kind honest exact safe "
         "check confirm explain describe offer suggest ask wait send give take keep make "
         "address email phone number name date price total item package box shipping "
         "tracking status update change cancel replace repair warranty manual guide rule").split()


def system_prompt(tokens, nonce):
    rng = random.Random(12345)
    words = []
    # about 0.87 words a token for such prose with punctuation (SmolLM2's
    # tokenizer, with the chat template and a question around it)
    while len(words) < int(tokens * 0.87):
        n = rng.randint(8, 16)
        sent = [rng.choice(WORDS) for _ in range(n)]
        sent[0] = sent[0].capitalize()
        words.extend(sent[:-1])
        words.append(sent[-1] + ".")
    return f"Session {nonce}. You are the assistant of a shop. " + " ".join(words)


QUESTIONS = [
    "Where is my order {k}?", "Can I return item {k}?", "How long does delivery take to zone {k}?",
    "Is product {k} in stock?", "How do I change the address of order {k}?",
    "What is the warranty on item {k}?", "Why was card payment {k} refused?",
    "Can you cancel order {k}?",
]


def build_messages(args, idx, k):
    if args.workload == "unique-prompt":
        q = QUESTIONS[(idx + k) % len(QUESTIONS)].format(k=k)
        return [{"role": "system", "content": system_prompt(args.system_tokens, f"{args.nonce}-{idx}-{k}")},
                {"role": "user", "content": q}]
    if args.workload == "shared-prompt":
        q = QUESTIONS[(idx + k) % len(QUESTIONS)].format(k=k)
        return [{"role": "system", "content": args.system_text},
                {"role": "user", "content": f"Client {idx}: {q}"}]
    return [{"role": "user", "content": PROMPTS[(idx + k) % len(PROMPTS)]}]


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def one_request(url, args, messages, max_tokens):
    """(time to first token, answer text, usage) of one streamed greedy request
    (given up, with socket.timeout, after --deadline seconds)."""
    u = urllib.parse.urlparse(url)
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    body = {"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    if args.cache_prompt:
        body["cache_prompt"] = True
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.deadline)
    t0 = time.monotonic()
    ttft, text, usage = None, "", None
    try:
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
        r = c.getresponse()
        if r.status != 200:
            raise OSError(f"HTTP {r.status}: {r.read()[:200]!r}")
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            if line[6:] == b"[DONE]":
                break
            j = json.loads(line[6:])
            usage = j.get("usage") or usage
            for ch in j.get("choices") or []:
                piece = (ch.get("delta") or {}).get("content")
                if piece:
                    if ttft is None:
                        ttft = time.monotonic() - t0
                    text += piece
    finally:
        c.close()
    return ttft, text, usage


def client_loop(url, args, end, hard_end, out, idx):
    u = urllib.parse.urlparse(url)
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    n = 0
    rng = random.Random(args.seed * 1000 + idx)
    while True:
        if args.requests:
            # a fixed set of requests: the next number, whichever client takes it
            with args.counter_lock:
                k = args.counter[0]
                args.counter[0] += 1
            if k >= args.requests:
                break
        else:
            if time.monotonic() >= end:
                break
            k = n
        # a planned disconnect: close after this many content chunks
        cut = rng.randint(1, max(1, args.max_tokens - 1)) if rng.random() < args.disconnect_rate else None
        body = {
            "model": "m",
            "messages": build_messages(args, idx if not args.requests else k % args.clients, k),
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if args.cache_prompt:
            body["cache_prompt"] = True
        n += 1
        answer = ""
        chunks = 0
        t0 = time.monotonic()
        if t0 >= hard_end:
            break
        c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=hard_end - t0)
        try:
            c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
            sock = c.sock  # the response keeps it when the server closes after it
            r = c.getresponse()
            if r.status != 200:
                out["errors"] += 1
                r.read()
                continue
            last = None
            usage = None
            while True:
                left = hard_end - time.monotonic()
                if left <= 0:
                    raise socket.timeout("deadline")
                sock.settimeout(left)
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    break
                j = json.loads(data)
                if j.get("usage"):
                    usage = j["usage"]
                for ch in j.get("choices") or []:
                    if (ch.get("delta") or {}).get("content"):
                        answer += ch["delta"]["content"]
                        now = time.monotonic()
                        if last is None:
                            out["ttft"].append(now - t0)
                        else:
                            out["itl"].append(now - last)
                        last = now
                        chunks += 1
                if cut is not None and chunks >= cut:
                    break
            if cut is not None and chunks >= cut:
                out["disconnected"] += 1  # intentional, not an error
                r.close()  # the response holds the socket when the server said Connection: close
                continue
            tokens = usage["completion_tokens"] if usage else chunks
            out["tokens"] += tokens
            out["requests"] += 1
            if args.requests:
                args.answers[k] = answer
        except socket.timeout:
            if time.monotonic() < hard_end - 1:
                out["errors"] += 1
            else:  # cut by --deadline: what arrived still counts as throughput
                out["unfinished"] += 1
                out["tokens"] += chunks
        except (OSError, http.client.HTTPException, ValueError):
            out["errors"] += 1
        finally:
            c.close()


def cpu_seconds(pid):
    """User plus system CPU seconds of process pid so far (None if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def rss_sampler(pid, every, stop, samples):
    """Appends (seconds, VmRSS, RssAnon, RssFile) in KiB every `every` seconds:
    RssFile is the mapped model file as pages of it are touched, RssAnon the
    heap and the KV cache, where a leak would show."""
    t0 = time.monotonic()
    while True:
        try:
            kib = {}
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    key = line.split(":", 1)[0]
                    if key in ("VmRSS", "RssAnon", "RssFile"):
                        kib[key] = int(line.split()[1])
            samples.append((time.monotonic() - t0, kib.get("VmRSS", 0), kib.get("RssAnon", 0),
                            kib.get("RssFile", 0)))
        except (OSError, ValueError, IndexError):
            return
        if stop.wait(every):
            return


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--deadline", type=float,
                    help="seconds after which requests still running are cut "
                    "(default: --seconds + max(60, --seconds))")
    ap.add_argument("--api-key")
    ap.add_argument("--label", default="")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--disconnect-rate", type=float, default=0.0,
                    help="probability per request of closing the connection mid-stream")
    ap.add_argument("--seed", type=int, default=1, help="seed for the disconnect choices")
    ap.add_argument("--rss-pid", type=int,
                    help="the server's process: sample its VmRSS, and report its CPU time")
    ap.add_argument("--rss-every", type=float, default=5.0, help="seconds between RSS samples")
    ap.add_argument("--rss-log", help="write every RSS sample (seconds, KiB) to this file")
    ap.add_argument("--workload", choices=("plain", "shared-prompt", "unique-prompt"), default="plain")
    ap.add_argument("--system-tokens", type=int, default=1000,
                    help="shared-prompt: about this many tokens of system prompt")
    ap.add_argument("--nonce", help="shared-prompt: the system prompt's first words "
                    "(default: random, so that nothing is cached before the run)")
    ap.add_argument("--cache-prompt", action="store_true",
                    help='send "cache_prompt": true (llama-server)')
    ap.add_argument("--requests", type=int, default=0,
                    help="send exactly this many requests (0: run for --seconds)")
    ap.add_argument("--record", help="with --requests: write the answers (JSON list) here")
    args = ap.parse_args()
    if args.deadline is None:  # a fixed set of requests runs to its end
        args.deadline = 1e7 if args.requests else args.seconds + max(60.0, args.seconds)
    if args.deadline <= 0:
        ap.error("--deadline must be positive")
    if not 0.0 <= args.disconnect_rate <= 1.0:
        ap.error("--disconnect-rate must be between 0 and 1")
    if args.record and not args.requests:
        ap.error("--record needs --requests")
    if args.requests and args.disconnect_rate:
        ap.error("--requests and --disconnect-rate do not go together")
    args.nonce = args.nonce or f"{random.SystemRandom().getrandbits(40):010x}"
    args.system_text = system_prompt(args.system_tokens, args.nonce)
    args.counter, args.counter_lock, args.answers = [0], threading.Lock(), [None] * args.requests
    probe = {}
    if args.workload == "shared-prompt":
        # the first request computes the system prompt; the second, another
        # client's question, can find it cached
        try:
            t1, _, u1 = one_request(args.url, args, build_messages(args, 0, 10**6), 4)
            t2, _, _ = one_request(args.url, args, build_messages(args, 1, 10**6 + 1), 4)
            probe = {"prompt_tokens": (u1 or {}).get("prompt_tokens"),
                     "ttft_first_ms": round(t1 * 1e3, 1) if t1 else None,
                     "ttft_second_ms": round(t2 * 1e3, 1) if t2 else None,
                     "ttft_ratio": round(t2 / t1, 3) if t1 and t2 else None}
        except (OSError, http.client.HTTPException, ValueError) as e:
            probe = {"probe_error": str(e) or type(e).__name__}
    outs = [dict(ttft=[], itl=[], tokens=0, requests=0, errors=0, disconnected=0, unfinished=0)
            for _ in range(args.clients)]
    rss = []
    stop = threading.Event()
    sampler = None
    if args.rss_pid:
        sampler = threading.Thread(target=rss_sampler, args=(args.rss_pid, args.rss_every, stop, rss))
        sampler.start()
    load_start = load_average()
    cpu_start = cpu_seconds(args.rss_pid) if args.rss_pid else None
    start = time.monotonic()
    end = start + args.seconds
    hard_end = start + args.deadline
    ths = [threading.Thread(target=client_loop, args=(args.url, args, end, hard_end, outs[i], i))
           for i in range(args.clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    wall = time.monotonic() - start  # includes the requests that ran past the end
    cpu_end = cpu_seconds(args.rss_pid) if args.rss_pid else None
    load_end = load_average()
    if sampler:
        stop.set()
        sampler.join()
    ttft = [x for o in outs for x in o["ttft"]]
    itl = [x for o in outs for x in o["itl"]]
    tokens = sum(o["tokens"] for o in outs)
    res = {
        "label": args.label, "clients": args.clients, "seconds": round(wall, 1),
        "requests": sum(o["requests"] for o in outs), "errors": sum(o["errors"] for o in outs),
        "tokens": tokens, "tok_s": round(tokens / wall, 1),
        "ttft_p50_ms": round(percentile(ttft, 50) * 1e3, 1),
        "ttft_p99_ms": round(percentile(ttft, 99) * 1e3, 1),
        "itl_p50_ms": round(percentile(itl, 50) * 1e3, 1),
        "itl_p99_ms": round(percentile(itl, 99) * 1e3, 1),
        "disconnected": sum(o["disconnected"] for o in outs),
        "unfinished": sum(o["unfinished"] for o in outs),
        "workload": args.workload,
        "load_start": load_start and round(load_start, 2),
        "load_end": load_end and round(load_end, 2),
    }
    if cpu_start is not None and cpu_end is not None:
        res["server_cpu_s"] = round(cpu_end - cpu_start, 2)
        res["server_cpu_ms_per_tok"] = round(1e3 * (cpu_end - cpu_start) / tokens, 2) if tokens else None
    res.update(probe)
    if args.record:
        with open(args.record, "w") as f:
            json.dump(args.answers, f)
    if rss:
        res.update(rss_samples=len(rss), rss_first_kib=rss[0][1], rss_mid_kib=rss[len(rss) // 2][1],
                   rss_last_kib=rss[-1][1], rss_peak_kib=max(s[1] for s in rss),
                   rss_anon_first_kib=rss[0][2], rss_anon_mid_kib=rss[len(rss) // 2][2],
                   rss_anon_last_kib=rss[-1][2], rss_file_first_kib=rss[0][3],
                   rss_file_last_kib=rss[-1][3])
        if args.rss_log:
            with open(args.rss_log, "w") as f:
                f.write("# seconds VmRSS RssAnon RssFile (KiB)\n")
                for t, k, anon, fil in rss:
                    f.write(f"{t:.1f} {k} {anon} {fil}\n")
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{args.label or args.url}: {args.clients} clients, {res['requests']} requests "
              f"({res['errors']} errors) in {res['seconds']} s: {res['tok_s']} tok/s | "
              f"TTFT p50 {res['ttft_p50_ms']} ms p99 {res['ttft_p99_ms']} ms | "
              f"ITL p50 {res['itl_p50_ms']} ms p99 {res['itl_p99_ms']} ms | "
              f"load average {res['load_start']} -> {res['load_end']}")
        if res["unfinished"]:
            print(f"  {res['unfinished']} requests still running at the {args.deadline:g} s deadline, cut")
        if "server_cpu_s" in res:
            print(f"  server CPU {res['server_cpu_s']} s, {res['server_cpu_ms_per_tok']} ms per token")
        if args.disconnect_rate:
            print(f"  {res['disconnected']} requests disconnected on purpose mid-stream")
        if probe:
            print(f"  shared prompt of {probe.get('prompt_tokens')} tokens: TTFT of the first "
                  f"request {probe.get('ttft_first_ms')} ms, of the second "
                  f"{probe.get('ttft_second_ms')} ms (ratio {probe.get('ttft_ratio')})"
                  + (f" ({probe['probe_error']})" if "probe_error" in probe else ""))
        if rss:
            print(f"  RSS KiB: first {res['rss_first_kib']} middle {res['rss_mid_kib']} "
                  f"last {res['rss_last_kib']} peak {res['rss_peak_kib']} ({res['rss_samples']} samples); "
                  f"anonymous first {res['rss_anon_first_kib']} middle {res['rss_anon_mid_kib']} "
                  f"last {res['rss_anon_last_kib']}; file first {res['rss_file_first_kib']} "
                  f"last {res['rss_file_last_kib']}")


if __name__ == "__main__":
    main()
