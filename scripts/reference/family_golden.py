#!/usr/bin/env python3
"""family_golden.py - record llama.cpp's reference outputs for the gemma3 and qwen3 families.

The independent reference of tests/test_gemma3.c and tests/test_qwen3.c, in the same JSONL
format as scripts/reference/smollm2_golden.py (read by tests/support/golden.c): a
header line, "request" lines (rendered prompt, its llama.cpp token ids, llama.cpp's greedy
answer, the top-k logits at every answer position) and "chat" lines.

--family gemma3: the real Gemma 3 270M file `sdnpu pull gemma-3-270m` fetches (a base model:
  its GGUF has no chat template, so requests are rendered with Gemma 3's instruction template
  written out below in Jinja, as sdnpu's `--chat-template gemma` renders them). Requests: per
  task file, the 10 rows with the shortest context + prompt (ties in file order), listed in
  file order: 40 requests, prompts of 60-640 tokens, so that the CTest stays within its time
  budget on 2 cores.
--family qwen3: a file written by `sdnpu make-model` (seeded random weights, the generated
  SentencePiece vocabulary, no chat template: requests are raw text as sdnpu renders them for
  a model without a template, tokenizer/request.c: the context, its trailing newlines dropped, a
  blank line, the prompt; tokenized with BOS and without control-token parsing). Fewer
  requests (--per-task); the answers of a random model
  mean nothing, its logits are what is compared. Used for the exact Qwen3-0.6B and 1.7B shapes
  and for the reduced-layer variant the CTest generates:
      ./sdnpu make-model --shape qwen3-0.6b --layers 2 --type Q8_0 --seed 1 --out /tmp/q3-l2.gguf

Run with OMP_WAIT_POLICY=passive on a shared machine. Examples (venv as in smollm2_golden.py):
  OMP_WAIT_POLICY=passive /root/refvenv/bin/python scripts/reference/family_golden.py --family gemma3 \\
      --model "$(./sdnpu pull gemma-3-270m | tail -1)" --out tests/golden/gemma3/llamacpp.jsonl
  OMP_WAIT_POLICY=passive /root/refvenv/bin/python scripts/reference/family_golden.py --family qwen3 \\
      --model /tmp/q3-l2.gguf --per-task 3 --max-new 16 --out tests/golden/qwen3/llamacpp-0.6b-l2.jsonl
"""
import argparse
import hashlib
import json
import os
import sys
import time

import jinja2
import numpy as np
import llama_cpp

from llamacpp_info import compiler, cpu_model

TASKS = ["summary/summary_specbench.jsonl", "rag/rag_specbench.jsonl", "ui/ui_droidtask.jsonl", "tweet/tweet_convai2_substitute.jsonl"]

# Gemma 3's instruction template (the structure of Google's tokenizer_config.json template for
# text-only messages): <bos>; a system message becomes a prefix "<system>\n\n" of the first
# user turn; "assistant" is written "model"; content trimmed.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)

CHAT_CASES = [
    [{"role": "system", "content": "You are a concise assistant. Answer in one sentence."},
     {"role": "user", "content": "Summarize: the meeting moved to Tuesday."}],
    [{"role": "user", "content": "Hi! Who are you?"},
     {"role": "assistant", "content": "I am Gemma, a small model."},
     {"role": "user", "content": "Tell me a fact about the sea."}],
    [{"role": "system", "content": "Reply as a phone assistant."},
     {"role": "user", "content": "Open the camera"},
     {"role": "assistant", "content": "- tap(2)"},
     {"role": "user", "content": "Now go back\n\twith a tab, unicode \u00e9\u4e2d and <b>markup</b>  "}],
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def user_message(row):
    """sdnpu's request format for one document (tokenizer/chat_template.h)."""
    ctx, prompt = row.get("context") or "", row.get("prompt") or ""
    if ctx and prompt:
        return "Document:\n" + ctx + "\n\n" + prompt
    return ("Document:\n" + ctx) if ctx else prompt


def pick_rows(shared, per_task):
    out = []
    for rel in TASKS:
        with open(os.path.join(shared, "datasets", rel), encoding="utf-8") as f:
            rows = [json.loads(l) for l in f if l.strip()]
        order = sorted(range(len(rows)), key=lambda i: (len(user_message(rows[i])), i))[:per_task]
        out += [rows[i] for i in sorted(order)]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=["gemma3", "qwen3"], required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-task", type=int, default=10)
    ap.add_argument("--max-new", type=int, default=24)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cmake-args", default=os.environ.get("CMAKE_ARGS", "-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"))
    a = ap.parse_args()

    # F32 KV cache and no flash attention, as in smollm2_golden.py
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=2048, n_batch=512, n_threads=a.threads, logits_all=False, verbose=False,
                          type_k=0, type_v=0, flash_attn=False)
    vocab = llm.n_vocab()
    tok_text = lambda t: llm.detokenize([t], special=True).decode("utf-8", "replace")
    bos_s = tok_text(llm.token_bos())

    def is_eog(t):
        return bool(llama_cpp.llama_vocab_is_eog(llama_cpp.llama_model_get_vocab(llm.model), t))

    env = jinja2.Environment(loader=jinja2.BaseLoader(), trim_blocks=False, lstrip_blocks=False)

    def render(messages):
        return env.from_string(GEMMA_TEMPLATE).render(messages=messages, add_generation_prompt=True, bos_token=bos_s)

    def raw_text(row):
        ctx, prompt = row.get("context") or "", row.get("prompt") or ""
        return (ctx.rstrip("\n") + "\n\n" if ctx else "") + prompt

    def tokenize(text):
        # gemma: the rendered text starts with <bos>, so no second BOS (sdn_chat_tokenize);
        # raw text (qwen3): BOS added, no control-token parsing
        if a.family == "gemma3":
            return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    header = {
        "kind": "header",
        "family": a.family,
        "model": os.path.basename(a.model),
        "model_size": os.path.getsize(a.model),
        "model_sha256": sha256(a.model),
        "reference": "llama.cpp via llama-cpp-python %s" % llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode(),
        "cmake_args": a.cmake_args,
        "compiler": compiler(),
        "cpu": cpu_model(),
        "threads": a.threads,
        "kv_cache": "F32",
        "flash_attn": False,
        "max_new": a.max_new,
        "topk": a.topk,
        "made_by": "scripts/reference/family_golden.py --family %s --per-task %d" % (a.family, a.per_task),
        "date": time.strftime("%Y-%m-%d"),
    }
    rows_out = []
    for row in pick_rows(a.shared, a.per_task):
        text = render([{"role": "user", "content": user_message(row)}]) if a.family == "gemma3" else raw_text(row)
        ids = tokenize(text)
        llm.reset()
        llm.eval(ids)
        answer, top_ids, top_logits = [], [], []
        for _ in range(a.max_new):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(vocab,)).astype(np.float32)
            order = np.argsort(-logits, kind="stable")[: a.topk]
            top_ids.append([int(t) for t in order])
            top_logits.append([round(float(logits[t]), 5) for t in order])
            t = int(order[0])
            if is_eog(t):
                break
            answer.append(t)
            llm.eval([t])
        rows_out.append({
            "kind": "request", "id": row["id"], "task": row["task"],
            "context": row.get("context") or "", "prompt": row.get("prompt") or "",
            "rendered": text, "prompt_ids": ids, "answer_ids": answer,
            "answer_text": llm.detokenize(answer).decode("utf-8", "replace"),
            "stopped_at_eog": len(answer) < a.max_new,
            "top_ids": top_ids, "top_logits": top_logits,
        })
        print("%-45s prompt %5d answer %3d" % (row["id"], len(ids), len(answer)), file=sys.stderr)
    chats = []
    if a.family == "gemma3":
        for msgs in CHAT_CASES:
            text = render(msgs)
            chats.append({"kind": "chat", "messages": msgs, "rendered": text, "ids": tokenize(text)})
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for r in rows_out + chats:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
