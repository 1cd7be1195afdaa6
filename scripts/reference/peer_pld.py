#!/usr/bin/env python3
"""peer_pld.py - sdnpu against llama.cpp's prompt-lookup speculative decoding, same requests,
same model file, same machine, one run (docs/peer.md).

The peer is llama.cpp as an application developer would use it for prompt lookup: the
llama-cpp-python package, `Llama(..., draft_model=LlamaPromptLookupDecoding(...))` and
`Llama.generate()`, greedy. Per task (summary, rag, ui, tweet):

  a. `sdnpu trace` records the requests (the first --limit rows of the task file, as `sdnpu
     bench` chooses them): the prompt token ids sdnpu renders (the model's chat template),
     and sdnpu's plain greedy answer. llama.cpp gets these ids, not text, so both engines see
     token-identical prompts.
  b. llama.cpp runs every request with plain greedy decoding and with each prompt-lookup
     configuration (--pld, default the library's own max_ngram_size=2, num_pred_tokens=10,
     and num_pred_tokens=2), the order rotating from request to request. Each run: the prompt
     except its last token is evaluated first (`Llama.eval`, timed as prefill), then
     `Llama.generate(prompt)` is timed from the call to the last answer token: it finds the
     evaluated prefix in its cache, evaluates the last prompt token and decodes. That is the
     same span sdnpu's bench times as decode (its prefill also stops one token short; the
     last prompt token is the root of the first decode step), and tok/s = answer tokens /
     that time, summed over the task's requests. Generation stops at an end-of-generation
     token (llama_vocab_is_eog) or a BOS token, as sdnpu's bench does, or at --max-tokens.
     Prompt lookup's answer must equal plain decoding's (mismatches are counted); llama.cpp's
     plain answer is also compared with sdnpu's (two engines, different rounding: reported,
     not required).
  c. `sdnpu bench --methods sdnpu` runs the same requests (same task file, --tasks, --limit,
     --max-tokens, --threads): plain decoding and sdnpu's drafting, interleaved per request
     in one process. The request count, total prompt tokens and plain answer tokens must equal
     the trace's (the check that both chose the same requests; bench prints no ids).
  The engine that runs first alternates from task to task.

  d. A table per task: sdnpu plain tok/s, sdnpu tok/s and speedup, llama.cpp plain tok/s,
     llama.cpp prompt lookup tok/s and speedup per configuration, and sdnpu tok/s / the best
     prompt-lookup configuration's tok/s; --json OUT writes it with the per-request figures,
     llama.cpp's build record (llamacpp_info.py) and the machine's load.

llama.cpp runs with its defaults otherwise (F16 KV cache, no flash attention, n_batch 512,
the libgomp default OMP_WAIT_POLICY: its threads spin briefly between steps; `passive` costs
it 2.7x in decode, see docs/results.md), with n_threads = n_threads_batch = --threads and n_ctx 4096
(sdnpu bench's context). The prompt-lookup instance needs logits_all=True: llama-cpp-python
forces it on for a draft model but sizes its score buffer from the constructor argument.

  /root/refvenv/bin/python scripts/reference/peer_pld.py --sdnpu build/sdnpu \\
      --model smollm2-135m-instruct --limit 20 --json log/peer-pld/peer_pld.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import llama_cpp
from llama_cpp.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding

from llamacpp_info import build_info, cpu_model

TASK_FILES = {  # the task files sdnpu bench uses (ui: DroidTask, whole tasks in file order)
    "summary": "summary/summary_specbench.jsonl",
    "rag": "rag/rag_specbench.jsonl",
    "ui": "ui/ui_droidtask.jsonl",
    "tweet": "tweet/tweet_convai2_substitute.jsonl",
}
N_CTX = 4096


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def resolve_model(exe, model):
    if os.path.isfile(model):
        return os.path.abspath(model)
    out = subprocess.run([exe, "info", "--model", model], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("file:"):
            return line.split(":", 1)[1].strip().rsplit(" (", 1)[0]
    sys.exit("peer_pld: cannot find the file of model %s in `sdnpu info`" % model)


def cpu_busy_s():
    """Busy CPU seconds of the whole machine (/proc/stat) and of this process and its children."""
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / hz  # user nice system irq softirq steal
    t = os.times()
    return busy, t.user + t.system + t.children_user + t.children_system


class OthersMeter:
    """The share of the machine's CPUs other processes used while a segment ran."""

    def __init__(self):
        self.t, (self.busy, self.own) = time.perf_counter(), cpu_busy_s()

    def share(self):
        busy, own = cpu_busy_s()
        wall = time.perf_counter() - self.t
        return max(0.0, (busy - self.busy) - (own - self.own)) / (wall * (os.cpu_count() or 1)) if wall > 0 else 0.0


def wait_quiet(limit_share, max_wait):
    """Wait (up to max_wait s) until other processes use less than limit_share of the CPUs over 5 s."""
    t0 = time.perf_counter()
    while True:
        m = OthersMeter()
        time.sleep(5)
        sh = m.share()
        waited = time.perf_counter() - t0
        if sh < limit_share or waited >= max_wait:
            return round(waited, 1), round(sh, 3)
        log("  waiting for a quieter machine: others use %.0f%% of the CPUs (waited %.0f s)" % (100 * sh, waited))


def first_ids(path, task, limit):
    """The ids sdnpu's dataset filter keeps: the first `limit` rows of `task`, in file order."""
    ids = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get("task") == task and len(ids) < limit:
                    ids.append(r["id"])
    return ids


class CountingDraft(LlamaDraftModel):
    """Prompt lookup as the library does it; counts the proposals (one list length per call)."""

    def __init__(self, inner):
        self.inner, self.calls, self.drafted = inner, 0, 0

    def __call__(self, input_ids, **kw):
        r = self.inner(input_ids, **kw)
        self.calls += 1
        self.drafted += len(r)
        return r


def llama_run(llm, prompt, max_tokens, stops, draft):
    """One request: prefill (all but the last prompt token), then generate(); times and tokens."""
    steps = [0]
    real_eval = llm.eval

    def counting_eval(tokens):
        steps[0] += 1
        real_eval(tokens)

    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt[:-1])
    t1 = time.perf_counter()
    if draft is not None:
        draft.calls = draft.drafted = 0
    llm.eval = counting_eval  # generate() calls self.eval once per verification step
    out, stop = [], "length"
    try:
        t2 = time.perf_counter()
        for tok in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, typical_p=1.0, temp=0.0, repeat_penalty=1.0):
            if tok in stops:
                stop = "eog"
                break
            out.append(int(tok))
            if len(out) >= max_tokens:
                break
        t3 = time.perf_counter()
    finally:
        del llm.eval
    return {"prefill_s": t1 - t0, "decode_s": t3 - t2, "n_gen": len(out), "steps": steps[0], "stop": stop, "out": out,
            "drafted": draft.drafted if draft is not None else 0}


COST_ROWS = (1, 2, 3, 4, 5, 8, 11)


def llama_verify_cost(llm, vocab, reps=5):
    """llama.cpp's time to evaluate a batch of n tokens (all logits, as a prompt-lookup step)
    after a 256-token context of random tokens: median ms per n, as `sdnpu bench-verify --model`."""
    rnd = np.random.default_rng(3)
    toks = [int(t) for t in rnd.integers(0, vocab, 256 + 16)]
    llm.reset()
    llm.eval(toks[:256])
    out = {}
    for n in COST_ROWS:
        ts = []
        for rep in range(reps + 1):
            llm.n_tokens = 256  # eval() drops the KV entries from n_tokens on
            t0 = time.perf_counter()
            llm.eval(toks[256:256 + n])
            if rep:
                ts.append(time.perf_counter() - t0)
        out[n] = round(1000 * float(np.median(ts)), 3)
    llm.reset()
    return out


def sdnpu_verify_cost(a, model):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([a.sdnpu, "bench-verify", "--model", model, "--rows", ",".join(map(str, COST_ROWS)), "--threads", str(a.threads),
                        "--json", f.name], check=True, stdout=subprocess.DEVNULL)
        j = json.load(open(f.name))
    return {int(r): round(float(m), 3) for r, m in zip(j["rows"], j["ms"])}


def run_sdnpu_trace(a, model, task, path, out):
    cmd = [a.sdnpu, "trace", "--model", model, "--dataset", path, "--tasks", task, "--limit", str(a.limit), "--max-tokens",
           str(a.max_tokens), "--threads", str(a.threads), "--prefill-topk", "0", "--out", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    rows = []
    with open(out, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return cmd, rows


def run_sdnpu_bench(a, model, task, path, outdir):
    cmd = [a.sdnpu, "bench", "--model", model, "--dataset", path, "--tasks", task, "--limit", str(a.limit), "--methods",
           a.sdnpu_methods, "--max-tokens", str(a.max_tokens), "--threads", str(a.threads), "--out", outdir]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 3):  # 3: some output differs from plain decoding (reported below)
        sys.exit("peer_pld: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    with open(os.path.join(outdir, "bench.json"), encoding="utf-8") as f:
        j = json.load(f)
    return cmd, j, p.stdout, wall


def tok_s(tokens, seconds):
    return tokens / seconds if seconds > 0 else 0.0


def summarize_llama(runs):
    n_gen = sum(r["n_gen"] for r in runs)
    dec = sum(r["decode_s"] for r in runs)
    steps = sum(r["steps"] for r in runs)
    return {"requests": len(runs), "output_tokens": n_gen, "decode_s": round(dec, 4),
            "prefill_s": round(sum(r["prefill_s"] for r in runs), 4), "tok_s": round(tok_s(n_gen, dec), 2),
            "steps": steps, "mean_accepted": round(n_gen / steps, 3) if steps else 0.0,
            "drafted_per_step": round(sum(r["drafted"] for r in runs) / steps, 3) if steps else 0.0}


def pld_name(c):
    return "pld n%d p%d" % c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdnpu", default="build/sdnpu")
    ap.add_argument("--model", default="smollm2-135m-instruct", help="GGUF file or sdnpu's known model name")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--tasks", default="summary,rag,ui,tweet")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--pld", default="2:10,2:2",
                    help="prompt-lookup configurations max_ngram_size:num_pred_tokens, comma-separated (library default 2:10)")
    ap.add_argument("--sdnpu-methods", default="sdnpu", help="methods for sdnpu bench (the first is the one compared)")
    ap.add_argument("--cmake-args", default=None, help="CMAKE_ARGS of the llama-cpp-python install, if known (recorded)")
    ap.add_argument("--quiet", type=float, default=0.1,
                    help="before each engine's part, wait until other processes use less than this share of the CPUs (5 s window)")
    ap.add_argument("--max-wait", type=float, default=300, help="at most this many seconds of waiting per part")
    ap.add_argument("--work", default=None, help="directory for the traces and bench outputs (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the tables and per-request figures here")
    a = ap.parse_args()
    t_start = time.perf_counter()
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    load_start = os.getloadavg()
    model = resolve_model(a.sdnpu, a.model)
    tasks = [t for t in a.tasks.split(",") if t]
    for t in tasks:
        if t not in TASK_FILES:
            sys.exit("peer_pld: unknown task %s (known: %s)" % (t, ", ".join(TASK_FILES)))
    configs = []
    for c in a.pld.split(","):
        n, p = c.split(":")
        configs.append((int(n), int(p)))
    method = a.sdnpu_methods.split(",")[0]
    work = a.work or tempfile.mkdtemp(prefix="peer_pld.")
    os.makedirs(work, exist_ok=True)

    # llama.cpp: one plain instance (logits only for the last token, the library's default) and
    # one per prompt-lookup configuration; the weights are mapped once and shared.
    common = dict(model_path=model, n_ctx=N_CTX, n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
    plain = llama_cpp.Llama(**common)
    drafts = {c: CountingDraft(LlamaPromptLookupDecoding(max_ngram_size=c[0], num_pred_tokens=c[1])) for c in configs}
    plds = {c: llama_cpp.Llama(**common, logits_all=True, draft_model=drafts[c]) for c in configs}
    vocab = plain.model  # llama_model pointer
    stops = {t for t in range(plain.n_vocab()) if llama_cpp.llama_vocab_is_eog(llama_cpp.llama_model_get_vocab(vocab), t)}
    stops.add(plain.token_bos())
    warm = plain.tokenize(b"<|im_start|>user\nSay something about warming up.<|im_end|>\n<|im_start|>assistant\n", add_bos=False,
                          special=True)
    for llm, d in [(plain, None)] + [(plds[c], drafts[c]) for c in configs]:  # untimed: thread start, first touches
        llama_run(llm, warm, 8, stops, d)

    # the cost of a verification step of n tokens in each engine (explains which draft sizes pay)
    wait_quiet(a.quiet, a.max_wait)
    cost = {"llama.cpp": llama_verify_cost(plds[configs[0]], plain.n_vocab()), "sdnpu": sdnpu_verify_cost(a, model)}
    log("verify cost, ms per step of n tokens after 256 (n: llama.cpp / sdnpu): " +
        ", ".join("%d: %.2f / %.2f" % (n, cost["llama.cpp"][n], cost["sdnpu"].get(n, 0)) for n in COST_ROWS))

    sdnpu_version = subprocess.run([a.sdnpu, "--version"], capture_output=True, text=True).stdout.strip()
    info = subprocess.run([a.sdnpu, "info", "--model", model], capture_output=True, text=True).stdout
    kernel = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("kernel path")), "?")
    fingerprint = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("fingerprint")), "?")
    try:
        commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    log("peer_pld: %s; %d threads; %d requests per task; at most %d new tokens; llama.cpp %s; work dir %s" %
        (os.path.basename(model), a.threads, a.limit, a.max_tokens, llama_cpp.__version__, work))

    results, per_request = [], []
    for ti, task in enumerate(tasks):
        path = os.path.join(a.shared, "datasets", TASK_FILES[task])
        t_task = time.perf_counter()
        load0 = os.getloadavg()[0]
        trace_cmd, rows = run_sdnpu_trace(a, model, task, path, os.path.join(work, task + ".trace.jsonl"))
        want = first_ids(path, task, a.limit)
        got = [r["id"] for r in rows]
        if got != want:
            sys.exit("peer_pld: %s: the trace's requests %s are not the first %d rows of %s %s" % (task, got, a.limit, path, want))
        log("%s: %d requests traced (prompts %d-%d tokens)" % (task, len(rows), min(len(r["context_tokens"]) for r in rows),
                                                                max(len(r["context_tokens"]) for r in rows)))

        segments = {}

        def llama_part():
            waited, sh = wait_quiet(a.quiet, a.max_wait)
            meter = OthersMeter()
            runs = {"plain": []}
            runs.update({c: [] for c in configs})
            order = ["plain"] + configs
            for i, r in enumerate(rows):
                prompt = [int(t) for t in r["context_tokens"]]
                rec = {"task": task, "id": r["id"], "prompt_tokens": len(prompt), "sdnpu_plain_tokens": len(r["output_tokens"])}
                rmeter = OthersMeter()
                for j in range(len(order)):
                    k = order[(i + j) % len(order)]  # rotate: no configuration always runs first
                    llm = plain if k == "plain" else plds[k]
                    res = llama_run(llm, prompt, a.max_tokens, stops, None if k == "plain" else drafts[k])
                    runs[k].append(res)
                    rec["plain" if k == "plain" else pld_name(k)] = {x: (round(v, 5) if isinstance(v, float) else v)
                                                                     for x, v in res.items() if x != "out"}
                rec["others_share"] = round(rmeter.share(), 3)
                base = runs["plain"][-1]["out"]
                rec["llama_plain_equals_sdnpu_plain"] = base == [int(t) for t in r["output_tokens"]]
                for c in configs:
                    rec[pld_name(c)]["equals_plain"] = runs[c][-1]["out"] == base
                per_request.append(rec)
                log("  %-45s prompt %5d | llama.cpp plain %3d tok %6.1f tok/s | %s" % (
                    r["id"][:45], len(prompt), base.__len__(), tok_s(runs["plain"][-1]["n_gen"], runs["plain"][-1]["decode_s"]),
                    " | ".join("%s %6.1f tok/s%s" % (pld_name(c), tok_s(runs[c][-1]["n_gen"], runs[c][-1]["decode_s"]),
                                                      "" if runs[c][-1]["out"] == base else " DIFFERS") for c in configs)))
            segments["llama.cpp"] = {"waited_s": waited, "others_share_before": sh, "others_share": round(meter.share(), 3)}
            return runs

        def sdnpu_part():
            outdir = os.path.join(work, "bench_" + task)
            waited, sh = wait_quiet(a.quiet, a.max_wait)
            meter = OthersMeter()
            cmd, j, stdout, wall = run_sdnpu_bench(a, model, task, path, outdir)
            segments["sdnpu"] = {"waited_s": waited, "others_share_before": sh, "others_share": round(meter.share(), 3)}
            cells = {c["method"]: c for c in j["results"] if c["task"] == task}
            log("  sdnpu bench: %.0f s" % wall)
            return cmd, cells, stdout

        if ti % 2 == 0:
            runs = llama_part()
            bench_cmd, cells, bench_stdout = sdnpu_part()
            first = "llama.cpp"
        else:
            bench_cmd, cells, bench_stdout = sdnpu_part()
            runs = llama_part()
            first = "sdnpu"
        none, sd = cells.get("none"), cells.get(method)
        if not none or not sd:
            sys.exit("peer_pld: %s: sdnpu bench reported no %s/none rows:\n%s" % (task, method, bench_stdout))
        # same requests: counts and token totals of bench equal the trace's
        checks = {
            "requests": [none["requests"], len(rows)],
            "prompt_tokens": [none["prompt_tokens"], sum(len(r["context_tokens"]) for r in rows)],
            "plain_output_tokens": [none["output_tokens"], sum(len(r["output_tokens"]) for r in rows)],
        }
        for k, (x, y) in checks.items():
            if x != y:
                log("WARNING: %s: sdnpu bench %s %d != trace %d" % (task, k, x, y))
        same_requests = checks["requests"][0] == checks["requests"][1] and checks["prompt_tokens"][0] == checks["prompt_tokens"][1]
        lp = summarize_llama(runs["plain"])
        pl = {pld_name(c): summarize_llama(runs[c]) for c in configs}
        for c in configs:
            pl[pld_name(c)]["speedup"] = round(pl[pld_name(c)]["tok_s"] / lp["tok_s"], 3) if lp["tok_s"] else 0.0
            pl[pld_name(c)]["mismatches"] = sum(1 for x, y in zip(runs[c], runs["plain"]) if x["out"] != y["out"])
            pl[pld_name(c)]["max_ngram_size"], pl[pld_name(c)]["num_pred_tokens"] = c
        best = max(pl, key=lambda k: pl[k]["tok_s"])
        s_plain = 1000.0 / none["ms_per_token"]
        s_tok = 1000.0 / sd["ms_per_token"]
        row = {
            "task": task,
            "dataset": TASK_FILES[task],
            "requests": len(rows),
            "ids": [r["id"] for r in rows],
            "same_requests_checked": checks,
            "same_requests": same_requests,
            "first": first,
            "wall_s": round(time.perf_counter() - t_task, 1),
            "loadavg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "others_cpu": segments,
            "sdnpu": {"method": method, "plain_tok_s": round(s_plain, 2), "tok_s": round(s_tok, 2), "speedup": sd["speedup"],
                      "mean_accepted": round(sd["mean_accepted"], 3), "draft_per_step": round(sd["draft_per_step"], 3),
                      "output_tokens": sd["output_tokens"], "mismatches": sd["mismatches"],
                      "prefill_ms": none["prefill_ms"], "bench_rows": list(cells.values())},
            "llamacpp_plain": lp,
            "llamacpp_pld": pl,
            "best_pld": best,
            "llama_plain_equals_sdnpu_plain": sum(1 for q in per_request if q["task"] == task and q["llama_plain_equals_sdnpu_plain"]),
            "ratio_sdnpu_to_best_pld": round(s_tok / pl[best]["tok_s"], 3) if pl[best]["tok_s"] else 0.0,
            "ratio_sdnpu_plain_to_llamacpp_plain": round(s_plain / lp["tok_s"], 3) if lp["tok_s"] else 0.0,
            "commands": {"trace": " ".join(trace_cmd), "bench": " ".join(bench_cmd)},
        }
        results.append(row)
        log("%s done in %.0f s: sdnpu %.1f tok/s (plain %.1f), llama.cpp %s %.1f tok/s (plain %.1f): ratio %.2fx; "
            "other processes used %.0f%% / %.0f%% of the CPUs during the sdnpu / llama.cpp parts" % (
                task, row["wall_s"], s_tok, s_plain, best, pl[best]["tok_s"], lp["tok_s"], row["ratio_sdnpu_to_best_pld"],
                100 * segments["sdnpu"]["others_share"], 100 * segments["llama.cpp"]["others_share"]))

    wall = time.perf_counter() - t_start
    head = ["task", "reqs", "sdnpu plain tok/s", "sdnpu %s tok/s" % method, "speedup", "acc/step", "llama.cpp plain tok/s"]
    for c in configs:
        head += ["llama.cpp %s tok/s" % pld_name(c), "speedup", "acc/step"]
    head += ["sdnpu / best llama.cpp PLD"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in results:
        cells = [r["task"], str(r["requests"]), "%.1f" % r["sdnpu"]["plain_tok_s"], "%.1f" % r["sdnpu"]["tok_s"],
                 "%.2fx" % r["sdnpu"]["speedup"], "%.2f" % r["sdnpu"]["mean_accepted"], "%.1f" % r["llamacpp_plain"]["tok_s"]]
        for c in configs:
            p = r["llamacpp_pld"][pld_name(c)]
            cells += ["%.1f%s" % (p["tok_s"], "" if p["mismatches"] == 0 else " (%d differ)" % p["mismatches"]), "%.2fx" % p["speedup"],
                      "%.2f" % p["mean_accepted"]]
        cells += ["%.2fx (vs %s)" % (r["ratio_sdnpu_to_best_pld"], r["best_pld"])]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    bi = build_info(a.cmake_args)
    print("model %s (sdnpu fingerprint %s); %d threads; first %d requests per task; at most %d new tokens; greedy" %
          (os.path.basename(model), fingerprint, a.threads, a.limit, a.max_tokens))
    print("%s (commit %s, kernel path %s); %s" % (sdnpu_version, commit, kernel, bi["reference"]))
    print("llama.cpp system info: %s" % bi["system_info"])
    print("llama.cpp build options: %s" % ", ".join("%s=%s" % kv for kv in sorted(bi["ggml_options"].items())))
    print("pld nN pP = LlamaPromptLookupDecoding(max_ngram_size=N, num_pred_tokens=P); tok/s = answer tokens / decode time")
    print(table)
    for r in results:
        bad = [k for k, p in r["llamacpp_pld"].items() if p["mismatches"]]
        if bad or not r["same_requests"] or r["sdnpu"]["mismatches"]:
            print("note: %s: %s" % (r["task"], "; ".join(
                ["llama.cpp %s differs from its plain output on %d requests" % (k, r["llamacpp_pld"][k]["mismatches"]) for k in bad] +
                (["sdnpu bench and the trace disagree on the requests"] if not r["same_requests"] else []) +
                (["sdnpu's %s output differs from plain on %d requests" % (method, r["sdnpu"]["mismatches"])] if r["sdnpu"]["mismatches"] else []))))
    print("other processes' share of the CPUs during the sdnpu / llama.cpp parts: %s" % ", ".join(
        "%s %.0f%% / %.0f%%" % (r["task"], 100 * r["others_cpu"]["sdnpu"]["others_share"], 100 * r["others_cpu"]["llama.cpp"]["others_share"])
        for r in results))
    print("verify cost, ms per step of n tokens after a 256-token context (n: llama.cpp / sdnpu): " +
          ", ".join("%d: %.2f / %.2f" % (n, cost["llama.cpp"][n], cost["sdnpu"].get(n, 0)) for n in COST_ROWS))
    print("llama.cpp plain answers equal to sdnpu's plain answers: %s" % ", ".join(
        "%s %d/%d" % (r["task"], r["llama_plain_equals_sdnpu_plain"], r["requests"]) for r in results))
    print("total wall time %.0f s; load average %s at start, %s at end" % (wall, "/".join("%.2f" % x for x in load_start),
                                                                         "/".join("%.2f" % x for x in os.getloadavg())))
    if a.json:
        doc = {
            "made_by": "scripts/reference/peer_pld.py",
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "started": started,
            "wall_s": round(wall, 1),
            "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": os.getloadavg()},
            "model": os.path.basename(model),
            "model_fingerprint": fingerprint,
            "threads": a.threads,
            "limit": a.limit,
            "max_tokens": a.max_tokens,
            "sdnpu": {"version": sdnpu_version, "commit": commit, "kernel_path": kernel, "method": method, "methods": a.sdnpu_methods},
            "llamacpp": dict(bi, n_ctx=N_CTX, n_batch=512, kv_cache="F16 (default)", flash_attn=False,
                            sampling="generate(temp=0, top_k=1, top_p=1, min_p=0, repeat_penalty=1): greedy"),
            "pld_configs": [{"name": pld_name(c), "max_ngram_size": c[0], "num_pred_tokens": c[1]} for c in configs],
            "measured": ("decode tok/s = answer tokens / decode time summed over the task's requests; decode time = sdnpu bench's "
                         "t_decode (after a prefill of all prompt tokens but the last) and, for llama.cpp, the time of "
                         "Llama.generate() after Llama.eval() of all prompt tokens but the last, up to the last answer token; "
                         "stop at EOG/BOS or max_tokens"),
            "verify_cost_ms": {"context": 256, "rows": list(COST_ROWS), "llama.cpp": cost["llama.cpp"], "sdnpu": cost["sdnpu"],
                               "note": "median of 5; llama.cpp: Llama.eval of n tokens with logits_all; sdnpu: bench-verify --model"},
            "table_markdown": table,
            "tasks": results,
            "requests": per_request,
        }
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print("wrote %s" % a.json)


if __name__ == "__main__":
    main()
