#!/usr/bin/env python3
"""bench-prefix-cache.py - what the prefix cache saves, end to end over real HTTP with streaming
(docs/results.md, "The prefix cache", holds the tables this prints).

  python3 scripts/bench-prefix-cache.py [--sdnpu build/sdnpu] [--model smollm2-135m-instruct]
      [--data ../shared/datasets/longdoc/longdoc.jsonl] [--out DIR]
      [--llama-server PATH --llama-model GGUF]      # llama-server side by side

Scenarios, each on a fresh server process (2 slots x --threads threads, greedy, --max-tokens):
  slots  one document (the longest of --data that fits --ctx, 4-8K tokens): question 1; then
         questions 2 and 3 sent together, so that one lands on each slot (the other slot's
         context has never seen the document); then the server is restarted on the same
         --prefix-cache directory and asked question 4. Time to first token (TTFT) of each,
         and its share of question 1's.
  rag    --docs documents and --questions questions about each, in round robin (document 1
         question 1, document 2 question 1, ...), one request at a time: TTFT p50 and p95.
Configurations: sdnpu with its prefix cache (memory, and the disk tier in a temporary
directory), sdnpu with --prefix-cache-mb 0 (off), and with --llama-server llama.cpp's
llama-server with 2 slots (-np 2) and the reuse it offers: its slot choice by prompt
similarity, its host-memory prompt cache (--cache-ram, on by default), --cache-reuse 256, and
for the restart slot save and restore (--slot-save-path: both slots saved before the restart,
restored after it; the restore's time is reported and counted in that question's TTFT).
Every answer is compared with the first configuration's answer to the same request.

Requests: one user message "Document:\\n<context>\\n\\n<question>" rendered by the model's chat
template, temperature 0, "stream": true. TTFT: request sent -> first chunk with content.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["Summarize the document in two sentences.", "What is the main subject of the document?",
             "List three facts the document states.", "Who or what is mentioned first in the document?",
             "What happens at the end of the document?"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, argv: list[str], port: int, log: Path) -> None:
        self.port, self.log = port, log
        self.f = open(log, "ab")
        self.p = subprocess.Popen(argv, stdout=self.f, stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < 600:
            if self.p.poll() is not None:
                raise SystemExit(f"server exited ({self.p.returncode}); see {log}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"server did not start; see {log}")

    def stop(self) -> None:
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.f.close()


def ask(port: int, doc: str, question: str, max_tokens: int) -> dict:
    body = {"stream": True, "temperature": 0, "max_tokens": max_tokens,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"Document:\n{doc}\n\n{question}"}]}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"HTTP {r.status}: {r.read()[:300]!r}")
    ttft, text, last = None, "", {}
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ch = json.loads(line[6:])
        last = ch if ch.get("sdnpu") or ch.get("timings") else last
        for choice in ch.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") or ""
            if piece and ttft is None:
                ttft = time.perf_counter() - t0
            text += piece
    e2e = time.perf_counter() - t0
    x = last.get("sdnpu") or {}
    tm = last.get("timings") or {}
    return {"ttft": ttft if ttft is not None else e2e, "e2e": e2e, "text": text,
            "cached": x.get("prefix_cache_tokens", tm.get("cache_n", 0)), "reused": x.get("reused_prompt_tokens", 0),
            "disk": x.get("prefix_disk_tokens", 0), "prefill_ms": x.get("prefill_ms", tm.get("prompt_ms"))}


def slot_action(port: int, slot: int, action: str, filename: str) -> None:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", f"/slots/{slot}?action={action}", json.dumps({"filename": filename}), {"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"slot {slot} {action}: HTTP {r.status}: {body[:200]!r}")


def longest_docs(path: Path, n: int, max_chars: int) -> list[str]:
    rows = [json.loads(l) for l in path.open() if l.strip()]
    docs = sorted({r["context"] for r in rows if len(r["context"]) <= max_chars}, key=len, reverse=True)
    return docs[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdnpu", default=str(ROOT / "build" / "sdnpu"))
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "datasets" / "longdoc" / "longdoc.jsonl"))
    ap.add_argument("--threads", type=int, default=1, help="per slot (default 1: 2 slots on 2 cores)")
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--max-chars", type=int, default=30000, help="longest document for the slots scenario (characters)")
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--rag-chars", type=int, default=14000, help="longest document of the rag scenario")
    ap.add_argument("--scenarios", default="slots,rag")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server, for the side-by-side configuration")
    ap.add_argument("--llama-model", help="the GGUF llama-server loads (the same file as --model)")
    ap.add_argument("--out", default=str(ROOT / "build" / "bench-prefix-cache"))
    ap.add_argument("--only", help="only these configurations (comma-separated names)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    scen = a.scenarios.split(",")
    configs = [("sdnpu/cache", "sdnpu", ["--prefix-cache-mb", "1024"], True), ("sdnpu/off", "sdnpu", ["--prefix-cache-mb", "0"], False)]
    if a.llama_server:
        configs.append(("llama-server", "llama", [], True))
    if a.only:
        configs = [c for c in configs if c[0] in a.only.split(",")]
    ref: dict[str, str] = {}
    results: dict = {"command": " ".join(sys.argv), "configs": {}}

    def start(kind: str, extra: list[str], cache_dir: str | None, tag: str) -> Server:
        port = free_port()
        if kind == "sdnpu":
            argv = [a.sdnpu, "serve", "--model", a.model, "--port", str(port), "--slots", "2", "--threads", str(a.threads),
                    "--ctx", str(a.ctx), *extra] + (["--prefix-cache", cache_dir] if cache_dir else [])
        else:
            argv = [a.llama_server, "-m", a.llama_model, "--port", str(port), "-np", "2", "-t", str(a.threads), "-c", str(2 * a.ctx),
                    "--cache-reuse", "256", "--no-webui"] + (["--slot-save-path", cache_dir + "/"] if cache_dir else [])
        return Server(argv, port, out / f"{tag}.log")

    def check(key: str, r: dict, name: str) -> None:
        if key in ref and ref[key] != r["text"]:
            print(f"  NOTE {name} {key}: the answer differs from {configs[0][0]}'s")
        ref.setdefault(key, r["text"])

    for name, kind, extra, disk in configs:
        res: dict = {}
        if "slots" in scen:
            doc = longest_docs(Path(a.data), 1, a.max_chars)[0]
            d = tempfile.mkdtemp(prefix="pcache-") if disk else None
            s = start(kind, extra, d, name.replace("/", "-") + "-slots")
            q1 = ask(s.port, doc, QUESTIONS[0], a.max_tokens)
            check("slots-q1", q1, name)
            pair: list[dict] = [{}, {}]
            ts = [threading.Thread(target=lambda i=i: pair.__setitem__(i, ask(s.port, doc, QUESTIONS[1 + i], a.max_tokens))) for i in range(2)]
            for t in ts:
                t.start()
                time.sleep(0.05)
            for t in ts:
                t.join()
            for i, r in enumerate(pair):
                check(f"slots-q{2 + i}", r, name)
            if kind == "llama":
                for i in range(2):
                    slot_action(s.port, i, "save", f"slot{i}.bin")
            s.stop()
            s = start(kind, extra, d, name.replace("/", "-") + "-slots-restart")
            restore = 0.0
            if kind == "llama":
                t0 = time.perf_counter()
                for i in range(2):
                    slot_action(s.port, i, "restore", f"slot{i}.bin")
                restore = time.perf_counter() - t0
            q4 = ask(s.port, doc, QUESTIONS[3], a.max_tokens)
            q4["restore_s"] = restore
            q4["ttft"] += restore
            check("slots-q4", q4, name)
            s.stop()
            if d:
                shutil.rmtree(d, ignore_errors=True)
            res["slots"] = {"doc_chars": len(doc), "q1": q1, "q2": pair[0], "q3": pair[1], "restart": q4}
            print(f"{name} slots: q1 {q1['ttft']:.2f} s | q2 {pair[0]['ttft']:.2f} s (reused {pair[0]['reused']}, cached {pair[0]['cached']})"
                  f" | q3 {pair[1]['ttft']:.2f} s (reused {pair[1]['reused']}, cached {pair[1]['cached']}) | after a restart "
                  f"{q4['ttft']:.2f} s (disk {q4['disk']}, restore {q4['restore_s']:.2f} s) = {100 * q4['ttft'] / q1['ttft']:.1f}% of q1", flush=True)
        if "rag" in scen:
            docs = longest_docs(Path(a.data), a.docs, a.rag_chars)
            d = tempfile.mkdtemp(prefix="pcache-") if disk else None
            s = start(kind, extra, d, name.replace("/", "-") + "-rag")
            rows = []
            for q in range(a.questions):
                for i, doc in enumerate(docs):
                    r = ask(s.port, doc, QUESTIONS[q], a.max_tokens)
                    check(f"rag-{i}-{q}", r, name)
                    rows.append({"doc": i, "question": q, **r})
            s.stop()
            if d:
                shutil.rmtree(d, ignore_errors=True)
            later = [r["ttft"] for r in rows if r["question"] > 0]
            first = [r["ttft"] for r in rows if r["question"] == 0]
            q95 = lambda v: sorted(v)[max(0, int(round(0.95 * len(v))) - 1)]
            res["rag"] = {"rows": rows, "first_p50": statistics.median(first), "later_p50": statistics.median(later),
                          "later_p95": q95(later), "all_p50": statistics.median(first + later), "all_p95": q95(first + later)}
            print(f"{name} rag ({len(docs)} docs x {a.questions} questions): TTFT p50 {res['rag']['all_p50']:.2f} s, p95 "
                  f"{res['rag']['all_p95']:.2f} s; first question of each document p50 {res['rag']['first_p50']:.2f} s, later questions "
                  f"p50 {res['rag']['later_p50']:.2f} s, p95 {res['rag']['later_p95']:.2f} s", flush=True)
        results["configs"][name] = res
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"bench-prefix-cache: {out / 'results.json'}")


if __name__ == "__main__":
    main()
