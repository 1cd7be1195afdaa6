#!/usr/bin/env python3
"""smollm2_golden.py - record llama.cpp's reference outputs for SmolLM2-135M-Instruct.

The independent reference of tests/test_smollm2.c. For requests drawn from all four task
files in ../shared/datasets it records, with llama.cpp (through llama-cpp-python) on the
exact GGUF file sdnpu pulls:

  * the rendered prompt: the model's own Jinja chat template (from the GGUF metadata,
    rendered by jinja2 as llama-cpp-python does) applied to one user message built the way
    sdnpu builds a request ("Document:\\n<context>\\n\\n<prompt>", tokenizer/chat_template.h),
    and its token ids from llama.cpp's tokenizer (special tokens parsed);
  * llama.cpp's greedy answer (up to --max-new tokens, stopping at <|im_end|>), one token per
    llama_eval step;
  * at every answer position, the top --topk logits (ids and values) that predicted it: the
    teacher-forced reference for sdnpu's top-1 agreement and logit differences.

--cache-type f16 / q8_0 records the references of sdnpu's f16 and q8 KV caches (llama.cpp's
-ctk/-ctv, with its flash attention, which a quantized value cache needs) into
tests/golden/smollm2/llamacpp-f16.jsonl and -q8_0.jsonl; --longdoc N records N long documents
(datasets/longdoc) instead of the task files, into tests/golden/smollm2/longdoc-*.jsonl.

Run with OMP_WAIT_POLICY=passive on a shared machine (ggml's OpenMP threads otherwise spin
and the run takes 10x longer). Usage (the reference is built from the package index's source distribution; record the flags):
  python3 -m venv /root/refvenv
  CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \\
      /root/refvenv/bin/pip install llama-cpp-python==0.3.36 numpy jinja2
  /root/refvenv/bin/python scripts/reference/smollm2_golden.py \\
      --model "$(./sdnpu pull smollm2-135m-instruct | tail -1)" --shared ../shared \\
      --out tests/golden/smollm2/llamacpp.jsonl --cmake-args "$CMAKE_ARGS"
"""
import argparse
import json
import os
import sys
import time

import jinja2
import numpy as np
import llama_cpp

from llamacpp_info import compiler, cpu_model

# ggml type ids of the KV cache types (ggml.h: GGML_TYPE_F32 0, F16 1, Q8_0 8)
GGML_TYPES = {"f32": 0, "f16": 1, "q8_0": 8}
LONGDOC = [("longdoc/longdoc.jsonl", 0)]


def longdoc_pick(rows, n):
    """n long-document records: the shortest of each length band in turn (~2K, ~4K, ~6-8K), then
    the next shortest of each, so a few records cover the lengths."""
    bands = {}
    for r in sorted(rows, key=lambda r: len(r["context"])):
        bands.setdefault(r["meta"]["length_band"], []).append(r)
    out, k = [], 0
    while len(out) < n and any(k < len(b) for b in bands.values()):
        for band in sorted(bands):
            if k < len(bands[band]) and len(out) < n:
                out.append(bands[band][k])
        k += 1
    return out


TASKS = [  # (file under datasets/, rows taken in file order)
    ("summary/summary_specbench.jsonl", 12),
    ("rag/rag_specbench.jsonl", 12),
    ("ui/ui_droidtask.jsonl", 12),
    ("tweet/tweet_convai2_substitute.jsonl", 12),
]


def user_message(row):
    """sdnpu's request format for one document (tokenizer/chat_template.h)."""
    ctx, prompt = row.get("context") or "", row.get("prompt") or ""
    if ctx and prompt:
        return "Document:\n" + ctx + "\n\n" + prompt
    return ("Document:\n" + ctx) if ctx else prompt


CHAT_CASES = [  # conversations beyond one user turn: system prompts, multi-turn
    [{"role": "system", "content": "You are a concise assistant. Answer in one sentence."},
     {"role": "user", "content": "Summarize: the meeting moved to Tuesday."}],
    [{"role": "user", "content": "Hi! Who are you?"},
     {"role": "assistant", "content": "I am SmolLM, a small assistant."},
     {"role": "user", "content": "Tell me a fact about the sea."}],
    [{"role": "system", "content": "Reply as a phone assistant."},
     {"role": "user", "content": "Open the camera"},
     {"role": "assistant", "content": "- tap(2)"},
     {"role": "user", "content": "Now go back\n\twith a tab, unicode \u00e9\u4e2d and <b>markup</b>"}],
    [{"role": "user", "content": ""}],
]


def chat_lines(llm, template, bos_s, eos_s):
    out = []
    for msgs in CHAT_CASES:
        text = render(template, msgs, bos_s, eos_s)
        out.append({"kind": "chat", "messages": msgs, "rendered": text,
                    "ids": llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)})
    return out


def render(template, messages, bos, eos):
    env = jinja2.Environment(loader=jinja2.BaseLoader(), trim_blocks=False, lstrip_blocks=False)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cmake-args", default=os.environ.get("CMAKE_ARGS", ""))
    ap.add_argument("--chat-only", action="store_true", help="replace only the chat lines of an existing --out file")
    ap.add_argument("--cache-type", default="f32", choices=sorted(GGML_TYPES),
                    help="llama.cpp's KV cache type for keys and values (default f32: the reference for sdnpu's f32 cache; "
                         "f16 and q8_0 are the references for its f16 and q8 caches)")
    ap.add_argument("--longdoc", type=int, default=0,
                    help="instead of the task files: this many records of datasets/longdoc/longdoc.jsonl, the shortest of "
                         "each length band first (long documents, 2-8K tokens)")
    a = ap.parse_args()

    # KV cache in F32 by default (llama.cpp's default is F16, whose rounding alone moves logits
    # by tenths) and no flash attention: the reference then differs from exact arithmetic only
    # by its 8-bit activation quantization and summation order, like sdnpu. A q8_0 value cache
    # needs llama.cpp's flash attention, which the f16 and q8_0 references then use.
    fa = a.cache_type != "f32"
    n_ctx = 10240 if a.longdoc else 4096
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=n_ctx, n_batch=512, n_threads=a.threads, logits_all=False, verbose=False,
                          type_k=GGML_TYPES[a.cache_type], type_v=GGML_TYPES[a.cache_type], flash_attn=fa)
    meta = llm.metadata
    template = meta["tokenizer.chat_template"]
    vocab = llm.n_vocab()
    eos = llm.token_eos()
    tok_text = lambda t: llm.detokenize([t], special=True).decode("utf-8", "replace")
    bos_s, eos_s = tok_text(llm.token_bos()), tok_text(eos)

    def is_eog(t):
        return bool(llama_cpp.llama_vocab_is_eog(llama_cpp.llama_model_get_vocab(llm.model), t))

    header = {
        "kind": "header",
        "model": os.path.basename(a.model),
        "reference": "llama.cpp via llama-cpp-python %s" % llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode(),
        "cmake_args": a.cmake_args,
        "compiler": compiler(),
        "cpu": cpu_model(),
        "threads": a.threads,
        "kv_cache": a.cache_type.upper(),
        "flash_attn": fa,
        "max_new": a.max_new,
        "topk": a.topk,
        "made_by": "scripts/reference/smollm2_golden.py",
        "date": time.strftime("%Y-%m-%d"),
    }
    chats = chat_lines(llm, template, bos_s, eos_s)
    if a.chat_only:
        with open(a.out, encoding="utf-8") as f:
            kept = [l for l in f if l.strip() and json.loads(l)["kind"] != "chat"]
        with open(a.out, "w", encoding="utf-8") as f:
            f.writelines(kept)
            for c in chats:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
        return
    rows_out = []
    for rel, n in (LONGDOC if a.longdoc else TASKS):
        with open(os.path.join(a.shared, "datasets", rel), encoding="utf-8") as f:
            rows = [json.loads(l) for l in f if l.strip()]
        rows = longdoc_pick(rows, a.longdoc) if a.longdoc else rows[:n]
        for row in rows:
            user = user_message(row)
            text = render(template, [{"role": "user", "content": user}], bos_s, eos_s)
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
            llm.reset()
            llm.eval(ids)
            answer, top_ids, top_logits = [], [], []
            for _ in range(a.max_new):
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(vocab,)).astype(np.float32)
                order = np.argsort(-logits, kind="stable")[: a.topk]
                top_ids.append([int(t) for t in order])
                top_logits.append([round(float(logits[t]), 5) for t in order])
                t = int(order[0])
                if t == eos or is_eog(t):
                    break
                answer.append(t)
                llm.eval([t])
            rows_out.append({
                "kind": "request",
                "id": row["id"],
                "task": row["task"],
                "context": row.get("context") or "",
                "prompt": row.get("prompt") or "",
                "rendered": text,
                "prompt_ids": ids,
                "answer_ids": answer,
                "answer_text": llm.detokenize(answer).decode("utf-8", "replace"),
                "stopped_at_eog": len(answer) < a.max_new,
                "top_ids": top_ids,
                "top_logits": top_logits,
            })
            print("%-45s prompt %5d answer %3d" % (row["id"], len(ids), len(answer)), file=sys.stderr)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for r in rows_out + chats:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
