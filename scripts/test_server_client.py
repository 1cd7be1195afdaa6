#!/usr/bin/env python3
"""test_server_client.py - `sdnpu serve` against the official `openai` Python client (run by
scripts/test-server.sh in a venv): chat, streaming, history through `user`, errors, the same
request answered byte for byte the same before and after other requests, and a bounded
load run (N requests, C concurrent, no retries) that must have zero failures; prints p50/p99
latency and throughput.

usage: test_server_client.py BASE_URL API_KEY MODEL_ID [REQUESTS] [CONCURRENCY]
"""
import concurrent.futures
import statistics
import sys
import time

import openai

base, key, model = sys.argv[1], sys.argv[2], sys.argv[3]
n_req = int(sys.argv[4]) if len(sys.argv) > 4 else 200
conc = int(sys.argv[5]) if len(sys.argv) > 5 else 8
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=300)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


msgs = [{"role": "system", "content": "You are a helpful assistant who answers in one sentence."},
        {"role": "user", "content": "The lighthouse on Gull Rock was built in 1871 and repaired in 1903 and 1950. "
                                    "When was the lighthouse built?"}]

# 1. chat: greedy, speculative decoding by default
t0 = time.time()
r = client.chat.completions.create(model=model, messages=msgs, max_tokens=48, temperature=0)
text = r.choices[0].message.content
ext = r.model_extra.get("sdnpu", {})
print(f"chat: {text!r} ({r.usage.completion_tokens} tokens, finish {r.choices[0].finish_reason}, "
      f"method {ext.get('method')}, {ext.get('mean_accepted_tokens')} tokens/step, {time.time() - t0:.2f} s)")
check(r.object == "chat.completion" and text and r.choices[0].finish_reason in ("stop", "length"), "chat answer")
check(ext.get("method") == "sdnpu", "speculative decoding is the default")
check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "usage adds up")

# 2. plain decoding gives the same greedy text
p = client.chat.completions.create(model=model, messages=msgs, max_tokens=48, temperature=0,
                                   extra_body={"sdnpu": {"method": "none"}})
check(p.choices[0].message.content == text, "greedy: speculative text == plain text")

# 3. streaming: the deltas concatenate to the same text
pieces, finish, usage = [], None, None
for chunk in client.chat.completions.create(model=model, messages=msgs, max_tokens=48, temperature=0, stream=True):
    if chunk.choices:
        if chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        finish = chunk.choices[0].finish_reason or finish
    usage = chunk.usage or usage
print(f"stream: {len(pieces)} chunks, finish {finish}")
check("".join(pieces) == text, "stream concatenates to the non-streamed text")
check(finish in ("stop", "length") and usage is not None, "stream ends with finish_reason and usage")

# 4. history: the same task for the same user drafts from the first answer. A fixed draft size
# of 16: the default budget follows this machine's verify-cost curve and may stay at 2-3
# tokens, which drafting from the prompt alone can already fill when the answer copies it
# (SmolLM2's answer here repeats the prompt's words but for one)
hx = {"sdnpu": {"draft_max": 16}}
h1 = client.chat.completions.create(model=model, messages=msgs, max_tokens=48, temperature=0, user="client-test", extra_body=hx)
h2 = client.chat.completions.create(model=model, messages=msgs, max_tokens=48, temperature=0, user="client-test", extra_body=hx)
s1, s2 = h1.model_extra["sdnpu"], h2.model_extra["sdnpu"]
print(f"history: tokens/step {s1['mean_accepted_tokens']} -> {s2['mean_accepted_tokens']}, "
      f"ms/token {s1['decode_ms_per_token']} -> {s2['decode_ms_per_token']}, history answers {s2['history_answers']}")
check(s2["history_answers"] >= 1 and s2["mean_accepted_tokens"] > s1["mean_accepted_tokens"], "history speeds up the repeat")
check(h2.choices[0].message.content == h1.choices[0].message.content, "history: same greedy answer")

# 5. completions endpoint
c = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
check(c.object == "text_completion" and c.choices[0].text, "text completion")

# 6. errors, as the client raises them
def expect(exc, param, fn):
    try:
        fn()
        check(False, f"expected {exc.__name__} ({param})")
    except exc as e:
        got = (e.body or {}).get("param") if isinstance(e.body, dict) else None
        print(f"error {e.status_code} {exc.__name__}: param {got}")
        check(got == param, f"{exc.__name__} names {param} (got {got})")


expect(openai.NotFoundError, "model", lambda: client.chat.completions.create(model="gpt-4o", messages=msgs))
expect(openai.BadRequestError, "max_tokens", lambda: client.chat.completions.create(model=model, messages=msgs, max_tokens=0))
expect(openai.BadRequestError, "temperature",
       lambda: client.chat.completions.create(model=model, messages=msgs, temperature=5))
expect(openai.BadRequestError, "messages[0].role",
       lambda: client.chat.completions.create(model=model, messages=[{"role": "wizard", "content": "x"}]))
expect(openai.BadRequestError, "sdnpu.method",
       lambda: client.chat.completions.create(model=model, messages=msgs, extra_body={"sdnpu": {"method": "warp"}}))
expect(openai.BadRequestError, "messages",
       lambda: client.chat.completions.create(model=model, messages=[{"role": "user", "content": "lighthouse " * 9000}]))
bad = openai.OpenAI(base_url=base, api_key="wrong-" + key, max_retries=0)
expect(openai.AuthenticationError, None, lambda: bad.chat.completions.create(model=model, messages=msgs))

# 7. the same request gives the same bytes whatever the slots served before: a
# document request on fresh slots, then after other requests (which leave the chat template's
# first tokens in the slots' KV caches for reuse), plain and speculative
doc = ("The harbour commission met on Tuesday to review the lighthouse on Gull Rock. Built in 1871 from granite "
       "quarried on the island, the tower was repaired in 1903 after a storm cracked its lantern room, and again "
       "in 1950 when the keepers' house was rebuilt. The commission heard that the lamp was converted to solar power "
       "in 2009, that visitors may climb the tower on Sundays from May to September, and that the council has voted "
       "to restore the keepers' house as a small museum. Funding will come from the harbour fund and a state grant; "
       "work is to begin next spring and last about eight months. ") * 3
dmsgs = [{"role": "user", "content": "Document:\n" + doc + "\n\nSummarize the document in two sentences."}]
first = client.chat.completions.create(model=model, messages=dmsgs, max_tokens=40, temperature=0,
                                       extra_body={"sdnpu": {"method": "none"}}).choices[0].message.content
for q in ("Say hello.", "What is 2 + 2?", "Name a colour.", "Write one word."):
    client.chat.completions.create(model=model, max_tokens=8, temperature=0,
                                   messages=[{"role": "user", "content": q}])
again = [client.chat.completions.create(model=model, messages=dmsgs, max_tokens=40, temperature=0,
                                        extra_body={"sdnpu": {"method": m}}) for m in ("none", "sdnpu", "none")]
print(f"determinism: {first[:60]!r}..., reused prompt tokens {[a.model_extra['sdnpu'].get('reused_prompt_tokens') for a in again]}")
check(all(a.choices[0].message.content == first for a in again),
      "the same request after other requests gives the same bytes (plain and speculative)")

# 8. load run: n_req requests, conc at a time, short answers, no retries
questions = ["When was the lighthouse built?", "When was the lamp repaired?", "What did the council vote?",
             "Who may visit on Sundays?", "Summarize the text in five words."]


def one(i):
    t = time.time()
    r = client.chat.completions.create(
        model=model, max_tokens=16, temperature=0, user=f"load-{i % 4}",
        messages=[msgs[0], {"role": "user", "content": msgs[1]["content"].split(" When")[0] + " " + questions[i % 5]}])
    return time.time() - t, r.usage.completion_tokens


lat, toks, errs = [], 0, 0
t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(conc) as ex:
    for f in concurrent.futures.as_completed([ex.submit(one, i) for i in range(n_req)]):
        try:
            dt, n = f.result()
            lat.append(dt)
            toks += n
        except Exception as e:  # noqa: BLE001 - every failure counts
            errs += 1
            print("load request failed:", repr(e)[:200])
wall = time.time() - t0
lat.sort()
p50 = statistics.median(lat) if lat else 0
p99 = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))] if lat else 0
print(f"load: {n_req} requests, {conc} concurrent: {errs} failed, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
      f"{len(lat) / wall:.2f} requests/s, {toks / wall:.1f} tokens/s, {wall:.1f} s")
check(errs == 0, "load run: zero failed requests")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all client checks passed")
