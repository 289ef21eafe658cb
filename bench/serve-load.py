#!/usr/bin/env python3
"""Load benchmark for an OpenAI-compatible server (piecewise serve, or
llama.cpp's llama-server): N concurrent streaming clients send chat
requests back to back for a fixed time. Prints aggregate generated tok/s
and p50/p99 time to first token and inter-token latency.

  bench/serve-load.py --url http://127.0.0.1:8080 --clients 4 --seconds 30

Standard library only. Tokens are counted from the usage the server
reports (stream_options.include_usage), else one per content chunk.

Soak options: --disconnect-rate P makes a client close its connection
mid-stream (after a random number of content chunks) with probability P
per request; those requests are counted as "disconnected", not as errors.
--rss-pid PID samples VmRSS from /proc/PID/status every --rss-every
seconds and reports the first, middle and last samples and the peak."""
import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse

PROMPTS = [
    "Tell me a short story about a cat.",
    "Explain why the sky is blue.",
    "Write a haiku about the sea.",
    "What are three uses of a paperclip?",
]


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def client_loop(url, args, end, out, idx):
    u = urllib.parse.urlparse(url)
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    n = 0
    rng = random.Random(args.seed * 1000 + idx)
    while time.monotonic() < end:
        # a planned disconnect: close after this many content chunks
        cut = rng.randint(1, max(1, args.max_tokens - 1)) if rng.random() < args.disconnect_rate else None
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": PROMPTS[(idx + n) % len(PROMPTS)]}],
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        n += 1
        c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
        t0 = time.monotonic()
        try:
            c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
            r = c.getresponse()
            if r.status != 200:
                out["errors"] += 1
                r.read()
                continue
            last = None
            chunks = 0
            usage = None
            while True:
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
        except (OSError, http.client.HTTPException, ValueError):
            out["errors"] += 1
        finally:
            c.close()


def rss_sampler(pid, every, stop, samples):
    t0 = time.monotonic()
    while True:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        samples.append((time.monotonic() - t0, int(line.split()[1])))
                        break
        except OSError:
            return
        if stop.wait(every):
            return


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--api-key")
    ap.add_argument("--label", default="")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--disconnect-rate", type=float, default=0.0,
                    help="probability per request of closing the connection mid-stream")
    ap.add_argument("--seed", type=int, default=1, help="seed for the disconnect choices")
    ap.add_argument("--rss-pid", type=int, help="sample VmRSS of this process")
    ap.add_argument("--rss-every", type=float, default=5.0, help="seconds between RSS samples")
    ap.add_argument("--rss-log", help="write every RSS sample (seconds, KiB) to this file")
    args = ap.parse_args()
    if not 0.0 <= args.disconnect_rate <= 1.0:
        ap.error("--disconnect-rate must be between 0 and 1")
    outs = [dict(ttft=[], itl=[], tokens=0, requests=0, errors=0, disconnected=0)
            for _ in range(args.clients)]
    rss = []
    stop = threading.Event()
    sampler = None
    if args.rss_pid:
        sampler = threading.Thread(target=rss_sampler, args=(args.rss_pid, args.rss_every, stop, rss))
        sampler.start()
    start = time.monotonic()
    end = start + args.seconds
    ths = [threading.Thread(target=client_loop, args=(args.url, args, end, outs[i], i))
           for i in range(args.clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    wall = time.monotonic() - start  # includes the requests that ran past the end
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
    }
    if rss:
        res.update(rss_samples=len(rss), rss_first_kib=rss[0][1], rss_mid_kib=rss[len(rss) // 2][1],
                   rss_last_kib=rss[-1][1], rss_peak_kib=max(k for _, k in rss))
        if args.rss_log:
            with open(args.rss_log, "w") as f:
                for t, k in rss:
                    f.write(f"{t:.1f} {k}\n")
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{args.label or args.url}: {args.clients} clients, {res['requests']} requests "
              f"({res['errors']} errors) in {res['seconds']} s: {res['tok_s']} tok/s | "
              f"TTFT p50 {res['ttft_p50_ms']} ms p99 {res['ttft_p99_ms']} ms | "
              f"ITL p50 {res['itl_p50_ms']} ms p99 {res['itl_p99_ms']} ms")
        if args.disconnect_rate:
            print(f"  {res['disconnected']} requests disconnected on purpose mid-stream")
        if rss:
            print(f"  RSS KiB: first {res['rss_first_kib']} middle {res['rss_mid_kib']} "
                  f"last {res['rss_last_kib']} peak {res['rss_peak_kib']} ({res['rss_samples']} samples)")


if __name__ == "__main__":
    main()
