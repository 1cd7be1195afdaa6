#!/usr/bin/env bash
# test-server.sh - `sdnpu serve` with the real SmolLM2-135M-Instruct against real clients, on
# loopback (CI runs it after the tests): the official `openai` Python client from the package
# index (in a venv: chat, streaming, history, errors, and a bounded load run with zero failed
# requests, p50/p99 latency and throughput printed; then structured output and tool calls,
# validated with json and jsonschema), then curl (health, models, chat, stream, 401, a
# json_schema answer), then hostile clients (scripts/test_server_attack.py: slow and idle connections while
# chat and /health must be served, then 64 oversized bodies with the resident memory bounded),
# then SIGTERM: the server must exit 0.
#   usage: scripts/test-server.sh [BUILD_DIR]   (default ./build, already built)
#   env:   LOAD_REQUESTS (200), LOAD_CONCURRENCY (8), SDNPU_SERVER_SLOTS (2), ATTACK_SECONDS (8)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
work="$(mktemp -d)"
pid=""
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# the openai client, in a venv kept in the build folder (Debian's pip refuses system installs)
venv="$build/openai-venv"
if ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check openai
fi
echo "test-server: openai $("$venv/bin/python" -c 'import openai; print(openai.__version__)')"

key="test-$RANDOM$RANDOM"
"$build/sdnpu" serve --model smollm2-135m-instruct --host 127.0.0.1 --port 0 --api-key "$key" \
  --slots "${SDNPU_SERVER_SLOTS:-2}" --threads 1 --queue 32 --history "$work/history.sqlite" 2> "$work/server.log" &
pid=$!
port=""
for _ in $(seq 600); do
  port="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; echo "test-server: the server exited" >&2; exit 1; }
  sleep 0.2
done
[ -n "$port" ] || { cat "$work/server.log" >&2; echo "test-server: the server did not start" >&2; exit 1; }
base="http://127.0.0.1:$port"
head -1 "$work/server.log"

"$venv/bin/python" "$root/scripts/test_server_client.py" "$base/v1" "$key" smollm2-135m-instruct \
  "${LOAD_REQUESTS:-200}" "${LOAD_CONCURRENCY:-8}"

# structured output and tool calls: answers validated with json and jsonschema
"$venv/bin/python" "$root/scripts/test_server_structured.py" "$base/v1" "$key" smollm2-135m-instruct

# curl
auth=(-H "Authorization: Bearer $key")
fail() { echo "test-server: curl: $*" >&2; exit 1; }
curl -sf --noproxy '*' "$base/health" | grep -q '"ok"' || fail "/health"
curl -sf --noproxy '*' "${auth[@]}" "$base/v1/models" | grep -q '"smollm2-135m-instruct"' || fail "/v1/models"
body='{"model":"smollm2-135m-instruct","messages":[{"role":"user","content":"Say hello."}],"max_tokens":12}'
curl -sf --noproxy '*' "${auth[@]}" -H 'Content-Type: application/json' -d "$body" "$base/v1/chat/completions" \
  | grep -q '"chat.completion"' || fail "chat"
sbody='{"model":"smollm2-135m-instruct","messages":[{"role":"user","content":"Say hello."}],"max_tokens":12,"stream":true}'
curl -sfN --noproxy '*' "${auth[@]}" -H 'Content-Type: application/json' -d "$sbody" "$base/v1/chat/completions" \
  | tail -2 | grep -q '^data: \[DONE\]' || fail "stream"
code="$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' -d "$body" "$base/v1/chat/completions")"
[ "$code" = 401 ] || fail "no key: status $code, want 401"
code="$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "${auth[@]}" -d '{"messages": [' "$base/v1/chat/completions")"
[ "$code" = 400 ] || fail "malformed JSON: status $code, want 400"
# docs/server.md's json_schema example: the answer validates against the schema
schema='{"type":"object","properties":{"id":{"type":"integer"},"action":{"type":"string","enum":["tap","text","long_tap","scroll_up","scroll_down","go_back","N/A"]},"input_text":{"type":"string"}},"required":["id","action","input_text"]}'
jbody='{"messages":[{"role":"user","content":"Task: open the camera.\nUI: <button id=1 text=\"Open camera\"></button>"}],"max_tokens":100,"response_format":{"type":"json_schema","json_schema":{"name":"ui_action","schema":'"$schema"'}}}'
curl -sf --noproxy '*' "${auth[@]}" -H 'Content-Type: application/json' -d "$jbody" "$base/v1/chat/completions" \
  | python3 -c 'import json, sys, jsonschema; a = json.load(sys.stdin)["choices"][0]["message"]["content"]; jsonschema.validate(json.loads(a), json.loads(sys.argv[1])); print("curl json_schema:", a)' "$schema" \
  || fail "json_schema answer"
curl -sf --noproxy '*' "${auth[@]}" "$base/metrics" | grep -E '^sdnpu_(requests_total\{code="(200|503)"\}|tokens_per_second|mean_accepted)'
echo "test-server: curl checks passed"

# hostile clients (about 10 s): the figures of docs/server.md, "Limits"
python3 "$root/scripts/test_server_attack.py" "$base/v1" "$key" smollm2-135m-instruct "$pid" "${ATTACK_SECONDS:-8}"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
tail -2 "$work/server.log"
[ "$rc" = 0 ] || { echo "test-server: the server exited with $rc after SIGTERM" >&2; exit 1; }
echo "test-server: passed"
