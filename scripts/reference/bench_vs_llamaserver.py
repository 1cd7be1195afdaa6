#!/usr/bin/env python3
"""bench_vs_llamaserver.py - sdnpu serve against llama.cpp's llama-server (built from source on
the same machine) on a task file's requests (by default the long documents, longdoc.jsonl),
end to end over real HTTP with streaming: time to first token, decode tok/s, end-to-end time,
and the answers. With --json-schema FILE every request of every configuration asks for a JSON
answer in that schema (OpenAI's response_format json_schema, which both servers take), every
answer is validated with Python's jsonschema package, and --sdnpu-noforced adds sdnpu's
speculative configuration without forced-text drafting (docs/constrained.md):

  python3 scripts/reference/bench_vs_llamaserver.py --llama-server PATH/llama-server \\
      --model ~/.cache/sdnpu/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --data ../shared/datasets/ui/ui_droidtask.jsonl --tasks ui --ctx 2048 --max-tokens 64 \\
      --json-schema datasets/schemas/ui_action.json --sdnpu-noforced

Configurations, for each KV cache type of --cache-type (f16, q8, f32; llama.cpp gets f16, q8_0,
f32), each a fresh server process with one slot, the same GGUF, --threads threads and a context
of --ctx tokens:
  sdnpu/sdnpu        sdnpu serve, requests with "sdnpu": {"method": "sdnpu"} (speculative)
  sdnpu/none         sdnpu serve, requests with "sdnpu": {"method": "none"} (plain decoding)
  sdnpu/sdnpu-noforced  (--sdnpu-noforced) "sdnpu": {"method": "sdnpu", "params": ["grammar.forced=0"]}
  llama/none         llama-server --spec-type none (no speculation)
  llama/ngram-...    llama-server --spec-type T for each T of --spec-types (n-gram speculative
                     decoding without a draft model: ngram-simple, ngram-map-k, ngram-mod)
llama-server also gets -fa on for every cache type (needed for a quantized V cache; used for
all types so that they compare like for like; --llama-fa off|auto changes it for f16 and f32).
Each server is started, waited for (GET /health), sent one short warm-up request (not
measured; --no-warmup skips it), then every selected request in file order, one at a time,
then stopped (SIGTERM, then SIGKILL after --stop-timeout s).
With --rounds N > 1 the whole list of configurations runs N times, in reverse order every other
round, and each request's figures are the median over rounds.

Requests: one user message "Document:\\n<context>\\n\\n<prompt>" (sdnpu's request format,
tokenizer/chat_template.h) sent as the same text to both servers, which both render it with the
model's chat template (ChatML with SmolLM2's default system turn); the prompt token counts the
two servers report are compared and a difference is printed. Greedy (temperature 0),
max_tokens --max-tokens, "stream": true with "stream_options": {"include_usage": true}.

Prompt reuse: both servers keep the KV entries of the slot's previous request for the common
prefix (sdnpu for both methods, llama-server with its default "cache_prompt": true). Every
request is a new document, so what is reused is the chat template's first tokens (24 with
SmolLM2: the system turn and "<|im_start|>user"), the same on both; each request's line shows it
(sdnpu's reused_prompt_tokens, llama-server's timings.cache_n). llama-server's host-memory
prompt cache (--cache-ram) cannot hit either: every server starts empty, and no document
repeats within a configuration. --llama-no-cache-prompt sends "cache_prompt": false instead
(llama-server then evaluates every prompt in full, about 1% more prompt tokens; its greedy
answers can change with that, since its prefill sums depend on where the chunks start).

Context: llama-server caps a slot at the model's trained context (8192 for SmolLM2, with a
warning in its log), so the default --ctx is 8192 for both; the longest request needs 7,475
prompt tokens + --max-tokens.

Measured per request and configuration (client side, time.perf_counter):
  ttft       request sent -> first streamed chunk with non-empty content
  decode     (completion_tokens - 1) / (finish chunk - first content chunk), in tok/s;
             completion_tokens from the stream's usage (both servers send it; the llama-server
             timings' predicted_n is the fallback)
  e2e        request sent -> end of the stream (data: [DONE])
  text       the concatenated content deltas
The servers' own figures (sdnpu's "sdnpu" block, llama-server's "timings") are kept in the JSON.

Checks: sdnpu's speculative answer must equal its plain answer byte for byte (a mismatch is
printed loudly and makes the exit status 3); each llama-server configuration's answers are
compared with sdnpu's plain answers and the number of equal ones reported (two engines with
different arithmetic may part at near-ties: information, not an error).

Report per cache type: per configuration the medians and sums of ttft, decode tok/s and e2e;
per request the e2e of every configuration, llama-server's best configuration for that
request's task (the llama-server configuration, speculative or not, with the lowest summed e2e
over the task's requests; chosen per task) and the ratio best-llama e2e / sdnpu speculative e2e
(> 1: sdnpu is faster). The exact server command lines, `sdnpu --version`, `llama-server
--version` and the load average before and after each configuration are printed and written to
--json. llama-server is not part of sdnpu and never needed by its tests: build it yourself
(cmake, GGML_NATIVE=ON, target llama-server) and pass its path.

  python3 scripts/reference/bench_vs_llamaserver.py --sdnpu build/sdnpu \\
      --llama-server ~/llama.cpp/build/bin/llama-server \\
      --model ~/.cache/sdnpu/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --data ../shared/datasets/longdoc/longdoc.jsonl --json longdoc_vs_llamaserver.json
"""
import argparse
import http.client
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# --cache-type value -> (sdnpu's --cache-type-k/-v name, llama.cpp's -ctk/-ctv name)
CACHE_TYPES = {"f16": ("f16", "f16"), "q8": ("q8", "q8_0"), "q8_0": ("q8", "q8_0"), "f32": ("f32", "f32"), "bf16": ("bf16", "bf16")}
SPEC_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
WARMUP = "Say hello."


class ServerError(Exception):
    pass


class RequestError(Exception):
    pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def version_of(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        return " | ".join(line.strip() for line in p.stdout.splitlines() if line.strip())
    except (OSError, subprocess.TimeoutExpired) as e:
        return "? (%s)" % e


def llama_build_options(exe):
    """A few options of the CMake build llama-server came from (its build dir's CMakeCache.txt)."""
    keep = ("CMAKE_BUILD_TYPE", "GGML_NATIVE", "GGML_OPENMP", "GGML_BLAS", "GGML_LLAMAFILE", "GGML_CPU_REPACK")
    out = {}
    d = os.path.dirname(os.path.abspath(exe))
    for cache in (os.path.join(d, "..", "CMakeCache.txt"), os.path.join(d, "..", "..", "CMakeCache.txt")):
        if os.path.isfile(cache):
            for line in open(cache, errors="replace"):
                k = line.split(":", 1)[0]
                if k in keep and "=" in line:
                    out[k] = line.split("=", 1)[1].strip()
            for f in sorted(os.listdir(d)):
                if f.startswith("libggml.so."):
                    out["libggml"] = f
            break
    return out


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


class Server:
    """One server process: started with its log in a file, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, name, cmd, port, log_path, start_timeout, stop_timeout):
        self.name, self.cmd, self.port, self.log_path = name, cmd, port, log_path
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.proc = None

    def log_tail(self, n=25):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def start(self):
        log = open(self.log_path, "w")
        try:
            # a session of its own: a Ctrl-C in the terminal reaches only this script, which stops it
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        except OSError as e:
            raise ServerError("[%s] cannot start %s: %s" % (self.name, self.cmd[0], e))
        finally:
            log.close()
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                raise ServerError("[%s] the server exited with status %s before it was ready; log %s:\n%s"
                                  % (self.name, self.proc.returncode, self.log_path, self.log_tail()))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.time() - t0 > self.start_timeout:
                self.stop()
                raise ServerError("[%s] not ready (GET /health) after %d s; log %s:\n%s"
                                  % (self.name, self.start_timeout, self.log_path, self.log_tail()))
            time.sleep(0.25)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            sys.stderr.write("[%s] did not stop within %d s of SIGTERM: killing it\n" % (self.name, self.stop_timeout))
            self.proc.kill()
            self.proc.wait()
        except ProcessLookupError:
            pass


def stream_chat(port, body, timeout):
    """POST /v1/chat/completions with stream: true; the client-side times and the answer."""
    data = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    text, usage, extra, finish = [], None, {}, None
    t_first = t_finish = None
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=data,
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        r = conn.getresponse()
        if r.status != 200:
            raise RequestError("HTTP %d: %s" % (r.status, r.read()[:2000].decode(errors="replace")))
        done = False
        while True:
            line = r.readline()
            if not line:
                break
            now = time.perf_counter()
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            ev = json.loads(payload)
            if "error" in ev:
                raise RequestError("error event in the stream: %s" % json.dumps(ev["error"])[:2000])
            for ch in ev.get("choices") or []:
                piece = (ch.get("delta") or {}).get("content")
                if piece:
                    if t_first is None:
                        t_first = now
                    text.append(piece)
                if ch.get("finish_reason"):
                    finish, t_finish = ch["finish_reason"], now
            if ev.get("usage"):
                usage = ev["usage"]
            for k in ("sdnpu", "timings"):
                if k in ev:
                    extra[k] = ev[k]
        t_end = time.perf_counter()
        if not done:
            raise RequestError("the stream ended without data: [DONE]")
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise RequestError("%s: %s" % (type(e).__name__, e))
    finally:
        conn.close()
    n = usage.get("completion_tokens") if usage else None
    if n is None and "timings" in extra:
        n = extra["timings"].get("predicted_n")
    if t_finish is None:
        t_finish = t_end
    decode = None
    if t_first is not None and n is not None and n > 1 and t_finish > t_first:
        decode = (n - 1) / (t_finish - t_first)
    return {"ttft_s": None if t_first is None else t_first - t0, "decode_tok_s": decode, "e2e_s": t_end - t0,
            "completion_tokens": n, "prompt_tokens": usage.get("prompt_tokens") if usage else None,
            "finish_reason": finish, "text": "".join(text), "usage_reported": usage is not None, "server": extra}


def request_body(cfg, content, max_tokens, cache_prompt=True, schema=None):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    if cfg["program"] == "sdnpu":
        body["sdnpu"] = {"method": cfg["method"]}
        if cfg.get("params"):
            body["sdnpu"]["params"] = cfg["params"]
    elif not cache_prompt:
        body["cache_prompt"] = False
    return body


def server_cmd(a, cfg, port):
    sct, lct = CACHE_TYPES[cfg["cache_type"]]
    if cfg["program"] == "sdnpu":
        cmd = [a.sdnpu, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", str(port), "--slots", "1",
               "--threads", str(a.threads), "--ctx", str(a.ctx), "--cache-type-k", sct, "--cache-type-v", sct]
        return cmd + shlex.split(a.sdnpu_args)
    fa = a.llama_fa if lct in ("f16", "f32") else "on"  # a quantized V cache needs flash attention
    cmd = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-np", "1", "-t", str(a.threads),
           "-tb", str(a.threads), "-c", str(a.ctx), "-ctk", lct, "-ctv", lct, "-fa", fa, "--spec-type", cfg["spec_type"]]
    return cmd + shlex.split(a.llama_args)


def first_diff(x, y):
    n = min(len(x), len(y))
    for i in range(n):
        if x[i] != y[i]:
            return i
    return n if len(x) != len(y) else -1


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, f="%.2f"):
    return "-" if x is None else f % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--sdnpu", default="build/sdnpu", help="the sdnpu program (default build/sdnpu)")
    ap.add_argument("--llama-server", required=True, help="path of a llama-server binary built on this machine")
    ap.add_argument("--model", required=True, help="the GGUF file both servers load")
    ap.add_argument("--data", default="../shared/datasets/longdoc/longdoc.jsonl", help="the longdoc task file")
    ap.add_argument("--ids", help="only these request ids, comma-separated (file order is kept)")
    ap.add_argument("--tasks", default="summary,rag", help="only these tasks, comma-separated (default summary,rag)")
    ap.add_argument("--limit", type=int, help="at most this many requests (the first ones selected, in file order)")
    ap.add_argument("--max-tokens", type=int, default=128, help="answer length limit (default 128)")
    ap.add_argument("--threads", type=int, default=2, help="compute threads of each server (default 2)")
    ap.add_argument("--ctx", type=int, default=8192, help="context tokens of each server's one slot (default 8192: "
                    "llama-server caps a slot at the trained context; the longest request needs 7,475 + --max-tokens)")
    ap.add_argument("--llama-no-cache-prompt", action="store_true", help="send \"cache_prompt\": false to llama-server "
                    "(default: its default, true; it then reuses the template's first tokens, as sdnpu does)")
    ap.add_argument("--cache-type", default="f16", help="KV cache types, comma-separated: f16, q8, f32 (default f16)")
    ap.add_argument("--spec-types", default="ngram-simple,ngram-map-k,ngram-mod",
                    help="llama-server --spec-type values besides none, comma-separated (default ngram-simple,ngram-map-k,"
                    "ngram-mod; empty: none only)")
    ap.add_argument("--llama-fa", default="on", choices=("on", "off", "auto"),
                    help="llama-server -fa for the f16 and f32 caches (default on; q8 always gets on)")
    ap.add_argument("--no-sdnpu-plain", action="store_true", help="skip sdnpu's plain-decoding configuration")
    ap.add_argument("--no-llama-plain", action="store_true", help="skip llama-server --spec-type none")
    ap.add_argument("--rounds", type=int, default=1, help="run every configuration this many times, reversing the "
                    "order every other round; per request the median over rounds (default 1)")
    ap.add_argument("--no-warmup", action="store_true", help="do not send the short warm-up request after a server starts")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one request may take (default 1800)")
    ap.add_argument("--start-timeout", type=float, default=300, help="seconds a server may take to become ready (default 300)")
    ap.add_argument("--stop-timeout", type=float, default=30, help="seconds after SIGTERM before SIGKILL (default 30)")
    ap.add_argument("--sdnpu-args", default="", help="extra arguments for sdnpu serve (one shell-quoted string), "
                    "written --sdnpu-args='...' (with =)")
    ap.add_argument("--llama-args", default="", help="extra arguments for llama-server (one shell-quoted string), "
                    "written --llama-args='--cache-ram 0' (with =)")
    ap.add_argument("--llama-source", default="", help="where the llama.cpp sources came from (repository@commit), "
                    "recorded in the JSON since llama-server --version may say 'unknown'")
    ap.add_argument("--log-dir", help="keep the servers' logs here (default: a temporary directory, removed at the end)")
    ap.add_argument("--json-schema", help="a JSON schema file: every request asks for a JSON answer in it "
                    "(response_format json_schema); answers are validated with the jsonschema package")
    ap.add_argument("--sdnpu-noforced", action="store_true", help="also sdnpu speculative without forced-text "
                    "drafting (params grammar.forced=0; meaningful with --json-schema)")
    ap.add_argument("--json", help="write every figure, answer and command line here")
    a = ap.parse_args()
    for path, what in ((a.sdnpu, "--sdnpu"), (a.llama_server, "--llama-server"), (a.model, "--model"), (a.data, "--data")):
        if not os.path.isfile(path):
            ap.error("%s: no such file: %s" % (what, path))
    schema, validator = None, None
    if a.json_schema:
        with open(a.json_schema) as f:
            schema = json.load(f)
        try:
            import jsonschema
            validator = jsonschema.validators.validator_for(schema)(schema)
        except ImportError:
            ap.error("--json-schema needs the jsonschema package (apt-get install python3-jsonschema)")
    ctypes = [{"q8_0": "q8"}.get(c.strip(), c.strip()) for c in a.cache_type.split(",") if c.strip()]
    for c in ctypes:
        if c not in CACHE_TYPES:
            ap.error("--cache-type: unknown type %r (f16, q8, f32)" % c)
    specs = [s.strip() for s in a.spec_types.split(",") if s.strip()]
    for s in specs:
        if s not in SPEC_TYPES:
            ap.error("--spec-types: unknown n-gram type %r (%s)" % (s, ", ".join(SPEC_TYPES)))

    # the requests
    tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    ids = [i.strip() for i in a.ids.split(",")] if a.ids else None
    reqs = []
    with open(a.data, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r["task"] in tasks and (ids is None or r["id"] in ids):
                    reqs.append(r)
    if ids:
        missing = set(ids) - {r["id"] for r in reqs}
        if missing:
            ap.error("--ids: not in %s (or not of --tasks): %s" % (a.data, ", ".join(sorted(missing))))
    if a.limit is not None:
        reqs = reqs[:a.limit]
    if not reqs:
        ap.error("no request selected")
    content = {r["id"]: "Document:\n%s\n\n%s" % (r["context"], r["prompt"]) for r in reqs}

    # the configurations
    configs = []
    for ct in ctypes:
        configs.append({"name": "sdnpu/sdnpu", "program": "sdnpu", "method": "sdnpu", "cache_type": ct})
        if a.sdnpu_noforced:
            configs.append({"name": "sdnpu/sdnpu-noforced", "program": "sdnpu", "method": "sdnpu", "cache_type": ct,
                            "params": ["grammar.forced=0"]})
        if not a.no_sdnpu_plain:
            configs.append({"name": "sdnpu/none", "program": "sdnpu", "method": "none", "cache_type": ct})
        for s in ([] if a.no_llama_plain else ["none"]) + specs:
            configs.append({"name": "llama/" + s, "program": "llama", "spec_type": s, "cache_type": ct})
    names = list(dict.fromkeys(c["name"] for c in configs))

    meta = {"sdnpu_version": version_of([a.sdnpu, "--version"]), "llama_server_version": version_of([a.llama_server, "--version"]),
            "llama_source": a.llama_source, "llama_build": llama_build_options(a.llama_server), "cpu": cpu_model(),
            "model": os.path.abspath(a.model), "data": os.path.abspath(a.data), "threads": a.threads, "ctx": a.ctx,
            "max_tokens": a.max_tokens, "rounds": a.rounds, "llama_cache_prompt": not a.llama_no_cache_prompt,
            "llama_fa": a.llama_fa, "warmup": not a.no_warmup, "cache_types": ctypes, "spec_types": specs,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv}
    print("sdnpu: %s\nllama-server: %s%s\nbuild: %s\nCPU %s, model %s, %d requests, %d threads, ctx %d, max_tokens %d, %d round(s)"
          % (meta["sdnpu_version"], meta["llama_server_version"], " (%s)" % a.llama_source if a.llama_source else "",
             meta["llama_build"], meta["cpu"], os.path.basename(a.model), len(reqs), a.threads, a.ctx, a.max_tokens, a.rounds))

    load, ncpu = os.getloadavg()[0], os.cpu_count() or 1
    if load > 0.5 * ncpu:
        print("warning: load average %.2f on %d CPUs: other processes compete for the cores; llama.cpp's OpenMP threads "
              "spin-wait and lose far more than sdnpu when preempted, so these timings say little" % (load, ncpu))
    log_dir = a.log_dir or tempfile.mkdtemp(prefix="longdoc_vs_llamaserver.")
    os.makedirs(log_dir, exist_ok=True)
    current = [None]  # the running server, for the cleanup

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)  # also when started with SIGINT ignored (a background job)

    runs = []  # one per configuration and round
    failures = []
    try:
        for rnd in range(a.rounds):
            order = configs if rnd % 2 == 0 else configs[::-1]
            for cfg in order:
                label = "%s %s" % (cfg["cache_type"], cfg["name"])
                port = free_port()
                cmd = server_cmd(a, cfg, port)
                log_path = os.path.join(log_dir, "%s_%s_r%d.log" % (cfg["cache_type"], cfg["name"].replace("/", "_"), rnd))
                print("\n[%s] round %d: %s" % (label, rnd + 1, " ".join(shlex.quote(x) for x in cmd)), flush=True)
                run = {"cache_type": cfg["cache_type"], "config": cfg["name"], "round": rnd, "command": cmd,
                       "load_before": os.getloadavg(), "results": {}}
                runs.append(run)
                srv = Server(label, cmd, port, log_path, a.start_timeout, a.stop_timeout)
                current[0] = srv
                try:
                    t0 = time.time()
                    srv.start()
                    run["start_s"] = time.time() - t0
                    if not a.no_warmup:
                        stream_chat(port, request_body(cfg, WARMUP, 8, not a.llama_no_cache_prompt), a.timeout)
                except (ServerError, RequestError) as e:
                    msg = str(e) if isinstance(e, ServerError) else "[%s] warm-up request failed: %s\nlog %s:\n%s" % (
                        label, e, log_path, srv.log_tail())
                    print("ERROR: " + msg, file=sys.stderr, flush=True)
                    failures.append(msg.split("\n")[0])
                    run["error"] = msg
                    srv.stop()
                    continue
                for r in reqs:
                    if not srv.alive():
                        msg = "[%s] request %s skipped: the server is gone (status %s); log %s" % (
                            label, r["id"], srv.proc.returncode, log_path)
                        print("ERROR: " + msg, file=sys.stderr, flush=True)
                        failures.append(msg)
                        continue
                    try:
                        body = request_body(cfg, content[r["id"]], a.max_tokens, not a.llama_no_cache_prompt, schema)
                        res = stream_chat(port, body, a.timeout)
                    except RequestError as e:
                        msg = "[%s] request %s failed: %s" % (label, r["id"], e)
                        print("ERROR: " + msg + "\nlog %s:\n%s" % (log_path, srv.log_tail(10)), file=sys.stderr, flush=True)
                        failures.append(msg)
                        run["results"][r["id"]] = {"error": str(e)}
                        continue
                    run["results"][r["id"]] = res
                    if not res["usage_reported"]:
                        print("  note: no usage in the stream of %s" % r["id"])
                    srv_x = res["server"]
                    reused = srv_x["sdnpu"].get("reused_prompt_tokens") if "sdnpu" in srv_x else \
                        srv_x["timings"].get("cache_n") if "timings" in srv_x else None
                    print("  %-36s ttft %7.2f s  decode %6s tok/s  e2e %7.2f s  %4s+%s tokens (%s, %s reused)"
                          % (r["id"], res["ttft_s"] or 0, fmt(res["decode_tok_s"], "%.1f"), res["e2e_s"],
                             res["prompt_tokens"], res["completion_tokens"], res["finish_reason"], reused), flush=True)
                srv.stop()
                current[0] = None
                run["load_after"] = os.getloadavg()
                print("  load average %.2f -> %.2f" % (run["load_before"][0], run["load_after"][0]))
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the server (its logs: %s)" % log_dir, file=sys.stderr)
        if current[0]:
            current[0].stop()
        sys.exit(130)
    finally:
        if current[0]:
            current[0].stop()

    # per (cache type, configuration, request): the median over rounds; the answer of the first round
    def per_request(ct, name):
        out = {}
        for r in reqs:
            rs = [run["results"].get(r["id"]) for run in runs if run["cache_type"] == ct and run["config"] == name]
            rs = [x for x in rs if x and "error" not in x]
            if not rs:
                continue
            texts = {x["text"] for x in rs}
            out[r["id"]] = {"ttft_s": med([x["ttft_s"] for x in rs]), "decode_tok_s": med([x["decode_tok_s"] for x in rs]),
                            "e2e_s": med([x["e2e_s"] for x in rs]), "prompt_tokens": rs[0]["prompt_tokens"],
                            "completion_tokens": rs[0]["completion_tokens"], "text": rs[0]["text"], "stable": len(texts) == 1}
            if len(texts) > 1:
                print("note: [%s %s] %s: the answer differs between rounds" % (ct, name, r["id"]))
        return out

    summary, identity, best, per_req_out = {}, {}, {}, {}
    mismatches = 0
    for ct in ctypes:
        pr = {n: per_request(ct, n) for n in names}
        per_req_out[ct] = pr
        print("\n== KV cache %s: %d requests, medians over requests (sums in brackets)" % (ct, len(reqs)))
        print("%-20s %5s %20s %12s %20s %8s%s" % ("configuration", "done", "ttft s (sum)", "decode tok/s", "e2e s (sum)", "= plain",
                                                 "    valid" if validator else ""))
        summary[ct] = {}
        plain = pr.get("sdnpu/none", {})
        for n in names:
            v = pr[n]
            if not v:
                print("%-18s %5d  (no results)" % (n, 0))
                continue
            eq = sum(1 for i, x in v.items() if i in plain and x["text"] == plain[i]["text"])
            ncmp = sum(1 for i in v if i in plain)
            s = {"requests": len(v), "ttft_median_s": med([x["ttft_s"] for x in v.values()]),
                 "ttft_sum_s": sum(x["ttft_s"] or 0 for x in v.values()),
                 "decode_median_tok_s": med([x["decode_tok_s"] for x in v.values()]),
                 "e2e_median_s": med([x["e2e_s"] for x in v.values()]), "e2e_sum_s": sum(x["e2e_s"] for x in v.values()),
                 "completion_tokens_sum": sum(x["completion_tokens"] or 0 for x in v.values()),
                 "equal_to_sdnpu_plain": eq, "compared_with_sdnpu_plain": ncmp}
            if validator:
                def valid(text):
                    try:
                        return not list(validator.iter_errors(json.loads(text)))
                    except ValueError:
                        return False
                s["valid"] = sum(1 for x in v.values() if valid(x["text"]))
                for i, x in v.items():
                    if not valid(x["text"]):
                        print("note: [%s %s] %s: answer not valid against the schema: %r" % (ct, n, i, x["text"][:200]))
            summary[ct][n] = s
            print("%-20s %5d %9s (%8s) %12s %9s (%8s) %8s%s" % (
                n, len(v), fmt(s["ttft_median_s"]), fmt(s["ttft_sum_s"], "%.1f"), fmt(s["decode_median_tok_s"], "%.1f"),
                fmt(s["e2e_median_s"]), fmt(s["e2e_sum_s"], "%.1f"), "%d/%d" % (eq, ncmp) if n != "sdnpu/none" else "-",
                "  %3d/%-3d" % (s["valid"], len(v)) if validator else ""))

        # prompt token counts: both servers should render the same prompt
        for i in plain:
            counts = {n: pr[n][i]["prompt_tokens"] for n in names if i in pr[n]}
            if len(set(counts.values())) > 1:
                print("note: %s: the servers report different prompt token counts: %s" % (i, counts))

        # identity: sdnpu speculative (with and without forced text) == sdnpu plain
        spec = pr.get("sdnpu/sdnpu", {})
        identity[ct] = {"compared": 0, "identical": 0, "mismatches": []}
        for i in list(spec) + ["noforced:" + k for k in pr.get("sdnpu/sdnpu-noforced", {})]:
            if i.startswith("noforced:"):
                i = i[9:]
                x_of = pr["sdnpu/sdnpu-noforced"][i]["text"]
            else:
                x_of = spec[i]["text"]
            if i not in plain:
                continue
            identity[ct]["compared"] += 1
            x, y = x_of, plain[i]["text"]
            if x == y:
                identity[ct]["identical"] += 1
            else:
                k = first_diff(x, y)
                mismatches += 1
                identity[ct]["mismatches"].append({"id": i, "first_diff_char": k})
                print("!!! MISMATCH [%s] %s: sdnpu speculative != sdnpu plain, first difference at character %d\n"
                      "!!!   speculative: %r\n!!!   plain:       %r"
                      % (ct, i, k, x[max(0, k - 40):k + 60], y[max(0, k - 40):k + 60]))
        if spec and plain:
            print("sdnpu speculative == sdnpu plain: %d/%d requests" % (identity[ct]["identical"], identity[ct]["compared"]))

        # llama-server's best configuration per task, and the per-request ratio to sdnpu speculative
        lnames = [n for n in names if n.startswith("llama/")]
        best[ct] = {}
        by_task = {}
        for r in reqs:
            by_task.setdefault(r["task"], []).append(r["id"])
        for task, tids in by_task.items():
            # the requests every configuration answered (one that failed everywhere, e.g. too long
            # for --ctx, is left out of the task's sums instead of hiding the comparison)
            tids = [i for i in tids if all(i in pr[n] for n in names)]
            cands = [(sum(pr[n][i]["e2e_s"] for i in tids), n) for n in lnames if tids and all(i in pr[n] for i in tids)]
            if cands:
                tot, n = min(cands)
                best[ct][task] = {"config": n, "e2e_sum_s": tot,
                                  "sdnpu_e2e_sum_s": sum(spec[i]["e2e_s"] for i in tids) if all(i in spec for i in tids) else None}
        print("per request, e2e s; best = llama-server's best configuration for the task; ratio = best / sdnpu/sdnpu")
        print("%-36s %-7s %6s %5s " % ("request", "task", "prompt", "ans") + " ".join("%13s" % n for n in names) +
              " %-18s %6s" % ("best", "ratio"))
        rows = []
        for r in reqs:
            i = r["id"]
            b = best[ct].get(r["task"], {}).get("config")
            be = pr[b][i]["e2e_s"] if b and i in pr[b] else None
            se = spec[i]["e2e_s"] if i in spec else None
            ratio = be / se if be and se else None
            anyr = next((pr[n][i] for n in names if i in pr[n]), None)
            print("%-36s %-7s %6s %5s " % (i, r["task"], anyr["prompt_tokens"] if anyr else "-",
                                          anyr["completion_tokens"] if anyr else "-") +
                  " ".join("%13s" % fmt(pr[n][i]["e2e_s"] if i in pr[n] else None) for n in names) +
                  " %-18s %6s" % (b or "-", fmt(ratio, "%.2fx")))
            rows.append({"id": i, "task": r["task"], "best_llama": b, "best_llama_e2e_s": be, "sdnpu_e2e_s": se, "ratio": ratio})
        for task, bt in best[ct].items():
            if bt.get("sdnpu_e2e_sum_s"):
                print("%s: llama-server's best configuration %s, summed e2e %.1f s vs sdnpu %.1f s: %.2fx"
                      % (task, bt["config"], bt["e2e_sum_s"], bt["sdnpu_e2e_sum_s"], bt["e2e_sum_s"] / bt["sdnpu_e2e_sum_s"]))
        ratios = [x["ratio"] for x in rows if x["ratio"]]
        if ratios:
            print("ratio best llama-server / sdnpu speculative: median %.2fx, min %.2fx, max %.2fx over %d requests"
                  % (statistics.median(ratios), min(ratios), max(ratios), len(ratios)))
        best[ct]["per_request"] = rows

    print("\nserver command lines:")
    seen = set()
    for run in runs:
        key = (run["cache_type"], run["config"])
        if key not in seen:
            seen.add(key)
            print("  %-4s %-18s %s" % (run["cache_type"], run["config"], " ".join(shlex.quote(x) for x in run["command"])))
    if failures:
        print("\n%d failure(s):\n  %s" % (len(failures), "\n  ".join(failures)), file=sys.stderr)
    if a.log_dir:
        print("server logs in %s" % log_dir)
    if a.json:
        out = {"meta": meta, "requests": [{"id": r["id"], "task": r["task"], "chars": len(r["context"])} for r in reqs],
               "configs": configs, "runs": runs, "per_request": per_req_out, "summary": summary, "identity": identity,
               "best_llama": best, "failures": failures}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    if not a.log_dir and not failures:
        for fn in os.listdir(log_dir):
            os.remove(os.path.join(log_dir, fn))
        os.rmdir(log_dir)
    elif failures and not a.log_dir:
        print("server logs kept in %s" % log_dir, file=sys.stderr)
    sys.exit(3 if mismatches else 1 if failures else 0)


if __name__ == "__main__":
    main()
