#!/usr/bin/env python3
"""test_server_structured.py - structured output and tool calls of `sdnpu serve`
against the official `openai` Python client, checked by independent parsers: every JSON
answer must parse with Python's json module and validate with the `jsonschema` package
against the schema asked for (the DroidTask action schema of docs/server.md), plain and
speculative decoding must give the same constrained answer, a forced tool call must come back
in OpenAI's shape (message.tool_calls, finish_reason "tool_calls"; streamed as
delta.tool_calls) with arguments valid against the tool's parameters, and a malformed or
unsupported schema must be a 400 naming the field and the keyword. Run by
scripts/test-server.sh (in its venv).

usage: test_server_structured.py BASE_URL API_KEY MODEL_ID
"""
import json
import subprocess
import sys

import openai

try:
    import jsonschema
except ImportError:  # the venv has the openai client; jsonschema is Debian's python3-jsonschema
    paths = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"],
                           capture_output=True, text=True, check=True).stdout.split()
    sys.path.extend(p for p in paths if p.endswith("-packages"))
    import jsonschema

base, key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=300)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


ACTION = {"type": "object",
          "properties": {"id": {"type": "integer"},
                         "action": {"type": "string",
                                    "enum": ["tap", "text", "long_tap", "scroll_up", "scroll_down", "go_back", "N/A"]},
                         "input_text": {"type": "string"}},
          "required": ["id", "action", "input_text"]}
RF = {"type": "json_schema", "json_schema": {"name": "ui_action", "schema": ACTION, "strict": True}}
SCREENS = [
    ("Open the camera.", "<input id=0>Search folders</input>\n<button id=1 text='Open camera'></button>\n<button id=2>go back</button>"),
    ("Search for 'cats'.", "<input id=0>Search</input>\n<button id=1 text='Settings'></button>"),
    ("Type 'hello' in the message field.", "<input id=0>Message</input>\n<button id=1 text='Send'></button>"),
]


def ui_messages(task, screen):
    return [{"role": "system", "content": "You control a phone. Answer with the next UI action as JSON: the element id, "
                                          "the action, and the text to type (\"N/A\" when none)."},
            {"role": "user", "content": f"Task: {task}\nCurrent UI state:\n{screen}"}]


def valid(text, schema, what):
    try:
        doc = json.loads(text)
        jsonschema.validate(doc, schema)
        return doc
    except (json.JSONDecodeError, jsonschema.ValidationError) as e:
        check(False, f"{what}: {text!r} is not valid: {str(e).splitlines()[0]}")
        return None


# 1. response_format json_schema: every answer valid, plain == speculative (greedy), sampled valid too
for task, screen in SCREENS:
    answers = {}
    for method in ("none", "sdnpu"):
        r = client.chat.completions.create(model=model, messages=ui_messages(task, screen), max_tokens=200, temperature=0,
                                           response_format=RF, extra_body={"sdnpu": {"method": method}})
        text = r.choices[0].message.content
        check(r.choices[0].finish_reason == "stop", f"json_schema ({method}): finished ({r.choices[0].finish_reason})")
        valid(text, ACTION, f"json_schema ({method})")
        answers[method] = text
        ext = r.model_extra.get("sdnpu", {})
        print(f"json_schema [{method}]: {text} ({r.usage.completion_tokens} tokens, {ext.get('mean_accepted_tokens')} tokens/step)")
    check(answers["none"] == answers["sdnpu"], "json_schema: speculative answer == plain answer")
for seed in (1, 2, 3):
    r = client.chat.completions.create(model=model, messages=ui_messages(*SCREENS[0]), max_tokens=200, temperature=1.0,
                                       seed=seed, response_format=RF)
    print(f"json_schema sampled (seed {seed}): {r.choices[0].message.content}")
    valid(r.choices[0].message.content, ACTION, f"json_schema sampled seed {seed}")

# streamed: the deltas concatenate to a valid answer
pieces = []
for chunk in client.chat.completions.create(model=model, messages=ui_messages(*SCREENS[1]), max_tokens=200, temperature=0,
                                            response_format=RF, stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        pieces.append(chunk.choices[0].delta.content)
valid("".join(pieces), ACTION, "json_schema streamed")

# 2. json_object: a JSON object
r = client.chat.completions.create(model=model, max_tokens=120, temperature=0, response_format={"type": "json_object"},
                                   messages=[{"role": "user", "content": "Describe a cat as JSON with its name and age."}])
print(f"json_object: {r.choices[0].message.content}")
doc = valid(r.choices[0].message.content, {"type": "object"}, "json_object")

# 3. tools: a forced call in OpenAI's shape, arguments valid against the tool's parameters
TAP = {"type": "object", "properties": {"id": {"type": "integer", "description": "the element to tap"}}, "required": ["id"]}
TYPE = {"type": "object", "properties": {"id": {"type": "integer"}, "text": {"type": "string"}}, "required": ["id", "text"]}
tools = [{"type": "function", "function": {"name": "tap", "description": "Tap a UI element", "parameters": TAP}},
         {"type": "function", "function": {"name": "type_text", "description": "Type text into a field", "parameters": TYPE}}]
params = {"tap": TAP, "type_text": TYPE}
msgs = [{"role": "user", "content": "Task: Open the camera.\nCurrent UI state:\n" + SCREENS[0][1]}]
for choice in ("required", {"type": "function", "function": {"name": "type_text"}}):
    r = client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice=choice, max_tokens=120, temperature=0)
    m = r.choices[0].message
    calls = m.tool_calls or []
    print(f"tool_choice {choice if isinstance(choice, str) else 'type_text'}: finish {r.choices[0].finish_reason}, "
          f"calls {[(c.function.name, c.function.arguments) for c in calls]}")
    check(r.choices[0].finish_reason == "tool_calls" and m.content is None and len(calls) == 1, "a forced tool call")
    for c in calls:
        check(c.type == "function" and c.id.startswith("call_") and c.function.name in params, "the call names a tool")
        if c.function.name in params:
            valid(c.function.arguments, params[c.function.name], "tool arguments")
        if not isinstance(choice, str):
            check(c.function.name == "type_text", "the named tool is called")
# streamed: delta.tool_calls, then finish_reason tool_calls
scalls, finish = [], None
for chunk in client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice="required", max_tokens=120,
                                            temperature=0, stream=True):
    if chunk.choices:
        scalls += chunk.choices[0].delta.tool_calls or []
        finish = chunk.choices[0].finish_reason or finish
check(finish == "tool_calls" and len(scalls) == 1 and scalls[0].function.name in params, "streamed tool call")
if scalls and scalls[0].function.name in params:
    valid(scalls[0].function.arguments, params[scalls[0].function.name], "streamed tool arguments")
# auto: content or a call, well-formed either way; none: content
for choice in ("auto", "none"):
    r = client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice=choice, max_tokens=60, temperature=0)
    m = r.choices[0].message
    print(f"tool_choice {choice}: finish {r.choices[0].finish_reason}, content {m.content!r}, calls {m.tool_calls}")
    check((m.tool_calls and r.choices[0].finish_reason == "tool_calls") or (m.content is not None and not m.tool_calls),
          f"tool_choice {choice}: content or tool calls")
    if choice == "none":
        check(not m.tool_calls, "tool_choice none: no tool calls")
# the call and its result in the history: the conversation goes on
r = client.chat.completions.create(model=model, tools=tools, max_tokens=40, temperature=0, messages=msgs + [
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "tap", "arguments": "{\"id\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "The camera is open."}])
check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), "a conversation with a tool result")


# 4. errors: 400 naming the field and the keyword
def expect_400(param, words, fn):
    try:
        fn()
        check(False, f"expected a 400 naming {param}")
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        msg = body.get("message", "")
        print(f"error {e.status_code}: param {body.get('param')}: {msg}")
        check(body.get("param") == param and all(w in msg for w in words), f"400 names {param} and {words}")


bad = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}, "required": ["when"]}
expect_400("response_format.json_schema.schema", ["format", "/properties/when"], lambda: client.chat.completions.create(
    model=model, messages=msgs, max_tokens=8,
    response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": bad}}))
expect_400("tools[1].function.parameters", ["format", "/properties/when"], lambda: client.chat.completions.create(
    model=model, messages=msgs, max_tokens=8, tool_choice="required",
    tools=[tools[0], {"type": "function", "function": {"name": "book", "parameters": bad}}]))
expect_400("response_format.type", [], lambda: client.chat.completions.create(
    model=model, messages=msgs, max_tokens=8, response_format={"type": "xml"}))
expect_400("tool_choice.function.name", [], lambda: client.chat.completions.create(
    model=model, messages=msgs, max_tokens=8, tools=tools, tool_choice={"type": "function", "function": {"name": "fly"}}))
expect_400("grammar", ["grammar"], lambda: client.chat.completions.create(
    model=model, messages=msgs, max_tokens=8, extra_body={"grammar": "root ::= (\"a\""}))

if failures:
    print(f"test_server_structured: {len(failures)} failure(s)")
    sys.exit(1)
print("test_server_structured: passed")
