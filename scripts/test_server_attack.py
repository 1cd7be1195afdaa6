#!/usr/bin/env python3
"""test_server_attack.py - `sdnpu serve` under hostile clients on loopback (run by
scripts/test-server.sh; the Python standard library only). Two bounded phases:

1. slow and idle clients: from 127.0.0.2-4, CONNS connections per address (a third each send a
   request head one header line at a time, stay silent, or send a body 16 bytes at a time),
   reopened when the server closes them, for SECONDS; meanwhile 4 clients on 127.0.0.1 send
   chat requests one after the other and /health is asked every 0.2 s.
2. oversized bodies (from 127.0.0.5): 32 concurrent bodies of 7.5 MB (250,000 one-character messages), then 32
   of 6.6 MB (20,000 messages of 300 characters), while /health is asked every 0.2 s.

Prints the figures (requests served, latencies, how the attackers were answered, the server's
resident memory before, at its peak and after) and exits 1 when a chat request from 127.0.0.1
failed, /health took longer than a second, or the peak resident memory passed
idle + body budget + 256 KiB per connection.

usage: test_server_attack.py BASE_URL API_KEY MODEL_ID SERVER_PID [SECONDS] [CONNS]
"""
import json
import socket
import statistics
import sys
import threading
import time

base, key, model, pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 8
conns = int(sys.argv[6]) if len(sys.argv) > 6 else 48
host, port = base.split("//")[1].split("/")[0].rsplit(":", 1)
port = int(port)
failures = []


def mem(field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def exchange(raw, src="127.0.0.1", timeout=60):
    """One request on a fresh connection: (status, body, seconds)."""
    t0 = time.time()
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(timeout)
    s.connect((host, port))
    data = b""
    try:
        s.sendall(raw)
    except OSError:
        pass
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    s.close()
    took = time.time() - t0
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ")[1])
    except (IndexError, ValueError):
        status = 0
    return status, body, took


def request(method, path, body=None):
    b = json.dumps(body).encode() if body is not None else b""
    return (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(b)}\r\n\r\n").encode() + b


def health_prober(stop, lat):
    """/health every 0.2 s: the seconds each answer took (a failed one counts as 99)."""
    while not stop.is_set():
        st, _, took = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", timeout=10)
        lat.append(took if st == 200 else 99.0)
        time.sleep(0.2)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


# ---- phase 1: slow and idle clients ----
SLOW_HEAD, IDLE, SLOW_BODY = range(3)


class Attacker:
    def __init__(self, src, kind):
        self.src, self.kind, self.sock, self.next = src, kind, None, 0.0

    def open(self):
        s = socket.socket()
        s.bind((self.src, 0))
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        self.sock, self.opened, self.next = s, time.time(), time.time() + 0.5
        self.sent_head = False

    def tick(self, out):
        """Feed the connection; on an answer or a close, count it and reopen at the next tick."""
        now = time.time()
        if self.sock is None:
            if now >= self.next:
                self.open()
            return
        try:
            d = self.sock.recv(64)
            if d or d == b"":
                code = d.split(b" ")[1].decode() if d.startswith(b"HTTP/1.1 ") else "closed"
                out[code] = out.get(code, 0) + 1
                self.sock.close()
                self.sock, self.next = None, now + 0.5
                return
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            out["reset"] = out.get("reset", 0) + 1
            self.sock.close()
            self.sock, self.next = None, now + 0.5
            return
        if now < self.next:
            return
        self.next = now + 0.5
        try:
            if self.kind == SLOW_HEAD:
                self.sock.send(b"POST /v1/chat/completions HTTP/1.1\r\n" if not self.sent_head else b"X-Slow: 1\r\n")
            elif self.kind == SLOW_BODY:
                self.sock.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode() +
                               b"\r\nContent-Length: 1000000\r\n\r\n" if not self.sent_head else b'{"messages":[{"')
            self.sent_head = True
        except (BlockingIOError, OSError):
            pass


idle_rss = mem("VmRSS")
stop = threading.Event()
health_lat, chat_lat, chat_fail = [], [], []
chat_body = {"model": model, "max_tokens": 16, "temperature": 0,
             "messages": [{"role": "user", "content": "The lighthouse on Gull Rock was built in 1871. When was it built?"}]}


def chatter():
    while not stop.is_set():
        st, body, took = exchange(request("POST", "/v1/chat/completions", chat_body))
        (chat_lat if st == 200 else chat_fail).append(took if st == 200 else st)


attackers = [Attacker(f"127.0.0.{2 + a}", i % 3) for a in range(3) for i in range(conns)]
for at in attackers:
    at.open()
threads = [threading.Thread(target=health_prober, args=(stop, health_lat))] + [threading.Thread(target=chatter) for _ in range(4)]
for t in threads:
    t.start()
outcomes, t0 = {}, time.time()
held_max = 0
while time.time() - t0 < seconds:
    for at in attackers:
        at.tick(outcomes)
    held_max = max(held_max, sum(at.sock is not None for at in attackers))
    time.sleep(0.02)
stop.set()
for t in threads:
    t.join()
for at in attackers:
    if at.sock:
        at.sock.close()
peak1 = mem("VmHWM")
print(f"attack: {len(attackers)} slow/idle/slow-body connections from 3 addresses for {seconds:.0f} s "
      f"(up to {held_max} open at once); answered them: {dict(sorted(outcomes.items()))}")
print(f"attack: {len(chat_lat)} chat requests served meanwhile ({len(chat_fail)} failed: {chat_fail[:5]}), "
      f"p50 {pct(chat_lat, .5):.3f} s, p99 {pct(chat_lat, .99):.3f} s; /health answered {sum(x < 99 for x in health_lat)} of "
      f"{len(health_lat)} probes, p50 {pct(health_lat, .5) * 1000:.1f} ms, max {max(health_lat) * 1000:.1f} ms")
if chat_fail:
    failures.append(f"{len(chat_fail)} chat requests failed under attack")
if max(health_lat) > 1.0:
    failures.append(f"/health failed or took longer than a second under attack (max {max(health_lat):.2f} s)")

# ---- phase 2: oversized bodies ----
def big(n, length):
    one = '{"role":"user","content":"' + "a" * length + '"}'
    return ('{"messages":[' + ",".join([one] * n) + '],"max_tokens":1}').encode()


statuses = {}
stop2 = threading.Event()
health2 = []
prober = threading.Thread(target=health_prober, args=(stop2, health2))
prober.start()
t0 = time.time()
for body in (big(250000, 1), big(20000, 300)):
    raw = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    res = []
    # from an address of their own: the per-address connection cap that refuses some of them
    # must not also refuse the /health probes of 127.0.0.1 (the probe's question is whether
    # the server stays responsive, not whether it shares an attacker's quota)
    ts = [threading.Thread(target=lambda: res.append(exchange(raw, src="127.0.0.5")[0])) for _ in range(32)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for st in res:
        statuses[st] = statuses.get(st, 0) + 1
took = time.time() - t0
stop2.set()
prober.join()
peak = mem("VmHWM")
after = mem("VmRSS")
st, m, _ = exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode() + b"\r\n\r\n")
budget = next((int(line.split()[1]) for line in m.decode().splitlines() if line.startswith("sdnpu_body_budget_bytes ")), 0)
bound = idle_rss + budget + 256 * 1024 * (3 * conns + 64)
print(f"bodies: 64 bodies of 7.5 and 6.6 MB, 32 at once, answered {dict(sorted(statuses.items()))} in {took:.1f} s; "
      f"/health answered {sum(x < 99 for x in health2)} of {len(health2)} probes meanwhile, max {max(health2) * 1000:.1f} ms")
print(f"memory: resident {idle_rss / 2**20:.0f} MiB before the attacks, peak {peak / 2**20:.0f} MiB "
      f"(after phase 1: {peak1 / 2**20:.0f} MiB; bound idle + budget + 256 KiB per connection: {bound / 2**20:.0f} MiB), "
      f"{after / 2**20:.0f} MiB after")
if set(statuses) - {400, 413, 503}:
    failures.append(f"oversized bodies answered {statuses}")
if max(health2) > 1.0:
    failures.append(f"/health failed or took longer than a second during the oversized bodies (max {max(health2):.2f} s)")
if peak > bound:
    failures.append(f"peak resident memory {peak / 2**20:.0f} MiB above {bound / 2**20:.0f} MiB")
if failures:
    print("FAILED:", "; ".join(failures))
    sys.exit(1)
print("attack: passed")
